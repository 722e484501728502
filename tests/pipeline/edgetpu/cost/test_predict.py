"""pipeline/edgetpu/cost/predict.py's devices: the Dev Board is the USB Accelerator's Edge TPU plus what its link adds
for streamed parameters; USB 2.0 adds its slower link for the input and output and for streamed parameters, and is
predicted only for a model like the figures it was fitted on (every op on the Edge TPU), saying why not for any other."""
from __future__ import annotations

from pipeline.edgetpu.cost import coefficients, features
from pipeline.edgetpu.cost.predict import MIB, estimate_cost

USB2_WHY = "the public figures it was fitted on are all of models with every op on the Edge TPU"


def _cost(parameter_bytes, on_edgetpu=True, input_bytes=150528, output_bytes=1001):
    ops = [features.OpCost(i, "CONV_2D", on_edgetpu if i == len(parameter_bytes) - 1 else True, False, 500_000_000, 0, b,
                           100_000) for i, b in enumerate(parameter_bytes)]
    return features.ModelCost(ops, input_bytes, output_bytes)


def test_the_dev_board_is_the_usb_time_plus_its_link_for_streamed_parameters():
    link = coefficients.load()["devices"]["devboard"]["edgetpu"]["streamed_mib"]
    assert link > 0
    cached = estimate_cost(_cost([2 * MIB, 2 * MIB]), 0.0)
    assert cached.split.streamed_bytes == 0
    assert abs(cached.time("devboard").edgetpu_ms - cached.time("usb3").edgetpu_ms) < 1e-9
    streamed = estimate_cost(_cost([6 * MIB, 6 * MIB, 6 * MIB]), 0.0)
    extra = streamed.time("devboard").edgetpu_ms - streamed.time("usb3").edgetpu_ms
    assert abs(extra - link * streamed.split.streamed_bytes / MIB) < 1e-6 and extra > 0


def test_usb2_is_predicted_for_a_model_cached_whole_and_adds_the_slower_link_for_its_input_and_output():
    e = estimate_cost(_cost([2 * MIB]), 0.0)
    c = coefficients.load()["devices"]["usb2"]["edgetpu"]["io_mib"]
    assert abs(e.time("usb2").edgetpu_ms - e.time("usb3").edgetpu_ms - c * (150528 + 1001) / MIB) < 1e-6
    assert "usb2" in e.as_dict()["devices"] and not e.as_dict()["not_predicted"]


def test_usb2_charges_its_slower_link_for_every_streamed_mib():
    link = coefficients.load()["devices"]["usb2"]["edgetpu"]
    assert link["streamed_mib"] > coefficients.load()["devices"]["devboard"]["edgetpu"]["streamed_mib"] > 0
    streaming = estimate_cost(_cost([6 * MIB, 6 * MIB]), 0.0)
    assert streaming.split.streamed_bytes == 6 * MIB
    extra = streaming.time("usb2").edgetpu_ms - streaming.time("usb3").edgetpu_ms
    expected = link["io_mib"] * (150528 + 1001) / MIB + link["streamed_mib"] * 6
    assert abs(extra - expected) < 1e-6
    line = next(x for x in streaming.lines() if "USB 2.0" in x)
    assert line.startswith(f"  predicted {streaming.time('usb2').total_ms:.1f} ms per inference on the USB Accelerator on USB 2.0")


def test_usb2_is_not_predicted_for_a_model_that_leaves_ops_on_the_cpu_and_says_why():
    on_cpu = estimate_cost(_cost([MIB, MIB], on_edgetpu=False), 0.0)
    line = next(x for x in on_cpu.lines() if "USB 2.0" in x)
    assert line.startswith("  not predicted on the USB Accelerator on USB 2.0") and USB2_WHY in line
    assert "this one leaves 1 op on the CPU" in on_cpu.as_dict()["not_predicted"]["usb2"]["why"]
    assert "usb2" not in on_cpu.as_dict()["devices"]
    assert {t.device for t in on_cpu.times} == {"usb3", "devboard"}


def test_check_only_says_usb2_is_not_predicted_for_a_model_with_an_op_on_the_cpu():
    from click.testing import CliRunner

    from pipeline.cli import main
    from tests.support.helpers import REPO

    model = REPO.parent / "shared" / "reference" / "coral" / "posenet_mobilenet_v1_075_353_481_quant_decoder.tflite"
    result = CliRunner().invoke(main, ["compile", str(model), "--check-only"])
    assert result.exit_code == 0, result.output
    assert ("  not predicted on the USB Accelerator on USB 2.0 (a Raspberry Pi 3's port): " + USB2_WHY
            + "; this one leaves 1 op on the CPU") in result.output
    assert "predicted" in result.output and "ms per inference on the Dev Board" in result.output
