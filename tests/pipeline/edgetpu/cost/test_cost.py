"""The Edge TPU cost model (pipeline/edgetpu/cost/): memory layout against Google's compiled twins, the cache rule,
the prediction's shape, and where a user sees it (`pipeline compile`, edgetpu.json, report.html, measured beside
predicted). The gates' advice, retrained at the size or width it names, is tests/pipeline/edgetpu/cost/test_advice.py.
"""
from __future__ import annotations

import json

import pytest

from edge.documents.latency import latency_document
from edge.model.tflite_file import read_model
from pipeline.edgetpu import cost, preflight
from pipeline.edgetpu.cost import coefficients, features, layout
from pipeline.edgetpu.cost.scaling import rescaled
from tests.support.helpers import REPO, record_artifact

REFERENCE = REPO.parent / "shared" / "reference" / "coral"


def _bench_module(name: str):
    """A module of bench/edgetpu_cost/ loaded from its file (the folder is not put on sys.path, where its names would
    shadow others for every later test)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"edgetpu_cost_{name}", REPO / "bench" / "edgetpu_cost" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compiled_split = _bench_module("compiled_layout").split  # the DarwiNN packages' own parameter bytes

PAIRS = ["mobilenet_v1_0.25_128_quant", "mobilenet_edgetpu_0.75_224_post_training_quant",
         "posenet_mobilenet_v1_075_353_481_quant_decoder", "deeplabv3_mnv2_dm05_pascal_quant"]


def _estimate(path):
    data = path.read_bytes()
    return cost.for_model(data, preflight.analyze(data))


def _compile(*args):
    from click.testing import CliRunner

    from pipeline.cli import main
    return CliRunner().invoke(main, ["compile", *map(str, args)])


@pytest.mark.parametrize("stem", PAIRS)
def test_predicted_parameter_memory_is_within_10_percent_of_the_compiled_twin(stem):
    truth = compiled_split(REFERENCE / f"{stem}_edgetpu.tflite")
    e = _estimate(REFERENCE / f"{stem}.tflite")
    predicted, compiled = e.split.cached_bytes + e.split.streamed_bytes, truth["cached"] + truth["streamed"]
    assert abs(predicted / compiled - 1) <= 0.10, (stem, predicted, compiled)
    assert e.split.all_cached == (truth["streamed"] == 0)  # all four are cached whole by Google's compiler


def test_a_recurrent_op_s_parameters_are_said_to_be_counted_raw():
    lstm = _estimate(REFERENCE / "keras_lstm_mnist_ptq.tflite")
    truth = compiled_split(REFERENCE / "keras_lstm_mnist_ptq_edgetpu.tflite")
    assert lstm.recurrent_ops == 1 and lstm.as_dict()["recurrent_ops_counted_raw"] == 1
    assert (lstm.split.cached_bytes + lstm.split.streamed_bytes) < 0.75 * (truth["cached"] + truth["streamed"])  # the miss
    assert lstm.lines()[1].startswith("  parameters: 1 recurrent op counted at raw bytes")  # under the memory split
    plain = _estimate(REFERENCE / "mobilenet_v1_0.25_128_quant.tflite")
    assert plain.recurrent_ops == 0 and not any("recurrent" in line for line in plain.lines())


def _costs(*parameter_bytes):
    ops = [features.OpCost(i, "CONV_2D", True, False, 1000, 0, b, 10) for i, b in enumerate(parameter_bytes)]
    return features.ModelCost(ops, 100, 10)


def test_cache_fills_in_execution_order_and_streams_what_does_not_fit():
    mib = 2 ** 20
    s = layout.split(_costs(3 * mib, 4 * mib, 2 * mib, 1 * mib), capacity_bytes=8 * mib)
    # 3 + 4 fit; 2 more would not (9 > 8) and is streamed; 1 still fits after it.
    assert (s.cached_bytes, s.streamed_bytes, s.streamed_ops) == (8 * mib, 2 * mib, [2])
    whole = layout.split(_costs(64 * mib), capacity_bytes=8 * mib)  # one layer bigger than the chip: streamed whole
    assert (whole.cached_bytes, whole.streamed_bytes) == (0, 64 * mib)


def test_streamed_parameters_cost_time_on_every_device():
    mib = 2 ** 20
    small = cost.predict.estimate_cost(_costs(1 * mib), 0.0)
    big = cost.predict.estimate_cost(_costs(1 * mib, 20 * mib), 0.0)
    assert big.split.streamed_bytes == 20 * mib
    assert [t.device for t in small.times] == ["usb3", "devboard", "usb2"]
    assert [t.device for t in big.times] == ["usb3", "devboard", "usb2"] and not big.unpredicted
    for t in big.times:
        assert t.edgetpu_ms > small.time(t.device).edgetpu_ms


def test_a_larger_input_is_predicted_slower_and_keeps_its_parameters():
    path = REFERENCE / "mobilenet_edgetpu_0.75_224_post_training_quant.tflite"
    e = _estimate(path)
    info = read_model(path)
    bigger = cost.predict.estimate_cost(rescaled(e.cost, info, size_ratio=2.0), 0.0)
    assert bigger.cost.total("macs") == pytest.approx(4 * e.cost.total("macs"), rel=0.02)
    assert bigger.split.cached_bytes == e.split.cached_bytes
    assert bigger.time("usb3").total_ms > e.time("usb3").total_ms


def test_coefficients_say_their_version_and_sources():
    data = coefficients.load()
    assert data["version"] and data["sources"] and data["results"] == "bench/results/edgetpu_cost.md"
    assert (REPO / data["results"]).exists()
    assert set(data["devices"]) == {"usb3", "devboard", "usb2"}
    assert all(d["edgetpu"] for d in data["devices"].values())
    assert data["devices"]["devboard"]["base"] == data["devices"]["usb2"]["base"] == "usb3"  # the same Edge TPU
    assert data["devices"]["usb2"]["requires"] == ["all_on_edgetpu"]  # streaming models grounded by Inception v4


def test_check_only_prints_predicted_ms_and_the_memory_split():
    result = _compile(REFERENCE / "mobilenet_v1_0.25_128_quant.tflite", "--check-only")
    assert result.exit_code == 0, result.output
    e = _estimate(REFERENCE / "mobilenet_v1_0.25_128_quant.tflite")
    assert f"{e.split.cached_bytes / 2**20:.2f} MiB cached on the chip" in result.output
    assert f"predicted {e.time('usb3').total_ms:.1f} ms per inference on the USB Accelerator (USB 3.0)" in result.output
    assert "Dev Board" in result.output


def test_json_carries_the_cost_with_its_version():
    result = _compile(REFERENCE / "mobilenet_v1_0.25_128_quant.tflite", "--check-only", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout.strip().splitlines()[0])
    assert record["cost"]["cost_model_version"] == coefficients.version()
    assert record["cost"]["devices"]["usb3"]["total_ms"] > 0


def test_latency_gate_on_a_bare_file_fails_with_the_size_that_fits():
    path = REFERENCE / "mobilenet_edgetpu_0.75_224_post_training_quant.tflite"
    e = _estimate(path)
    at_160 = cost.predict.estimate_cost(rescaled(e.cost, read_model(path), 160 / 224), 0.0).time("usb3").total_ms
    budget = round((at_160 + e.time("usb3").total_ms) / 2, 3)  # between the model as it is and the model at 160
    result = _compile(path, "--check-only", "--max-latency-ms", budget)
    assert result.exit_code == 1, result.output
    assert f"--max-latency-ms {budget:g}: predicted" in result.output
    size = int(__import__("re").search(r"the largest input size that meets it is (\d+)x\1", result.output).group(1))
    at = lambda side: cost.predict.estimate_cost(rescaled(e.cost, read_model(path), side / 224), 0.0).time("usb3").total_ms  # noqa: E731
    assert 160 <= size < 224 and at(size) <= budget < at(size + 8)  # the largest multiple of 8 within the budget
    assert _compile(path, "--check-only", "--max-latency-ms", round(e.time("usb3").total_ms + 0.05, 2)).exit_code == 0


def test_latency_gate_on_usb2_charges_the_slower_link_and_names_the_size_that_fits():
    path = REFERENCE / "mobilenet_edgetpu_0.75_224_post_training_quant.tflite"
    e = _estimate(path)
    on_usb2 = e.time("usb2").total_ms
    assert on_usb2 > e.time("usb3").total_ms
    budget = round((on_usb2 + e.time("usb3").total_ms) / 2, 3)  # met on USB 3.0, not on USB 2.0
    assert _compile(path, "--check-only", "--max-latency-ms", budget).exit_code == 0
    result = _compile(path, "--check-only", "--max-latency-ms", budget, "--latency-device", "usb2")
    assert result.exit_code == 1, result.output
    assert f"predicted {on_usb2:.2f} ms per inference on the USB Accelerator on USB 2.0" in result.output
    assert "the largest input size that meets it is" in result.output


def test_latency_gate_on_a_device_without_a_prediction_says_why_and_which_devices_can_judge_it():
    path = REFERENCE / "posenet_mobilenet_v1_075_353_481_quant_decoder.tflite"  # its decoder stays on the CPU
    result = _compile(path, "--check-only", "--max-latency-ms", 1000, "--latency-device", "usb2")
    assert result.exit_code == 1, result.output
    assert ("--max-latency-ms 1000: no time is predicted for this model on the USB Accelerator on USB 2.0 "
            "(a Raspberry Pi 3's port) (the public figures it was fitted on are all of models with every op on the "
            "Edge TPU; this one leaves 1 op on the CPU); judge it on another device: --latency-device usb3 or devboard"
            ) in result.output
    for device in ("usb3", "devboard"):  # the devices it names do judge it
        assert _compile(path, "--check-only", "--max-latency-ms", 1000, "--latency-device", device).exit_code == 0


def test_on_chip_gate_passes_a_model_cached_whole():
    result = _compile(REFERENCE / "mobilenet_v1_0.25_128_quant.tflite", "--check-only", "--require-on-chip")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("args, message", [(["--max-latency-ms", "-3"], "expected a positive number"),
                                           (["--latency-device", "pcie"], "Invalid value for '--latency-device'")])
def test_bad_gate_options_are_refused_in_one_line(args, message):
    result = _compile(REFERENCE / "mobilenet_v1_0.25_128_quant.tflite", "--check-only", *args)
    assert result.exit_code == 2 if "Invalid" in message else result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output


def _reference_run(tmp_path):
    from tests.pipeline.test_compile import reference_run  # the run set-up the compile stage's tests use
    return reference_run(tmp_path, "mobilenet_v1_0.25_128_quant")


def test_edgetpu_json_and_report_show_the_prediction_and_measured_beside_it(tmp_path):
    run_dir = _reference_run(tmp_path)
    assert _compile(run_dir, "--check-only").exit_code == 0
    report = json.loads((run_dir / "edgetpu.json").read_text())
    e = _estimate(run_dir / "model_int8.tflite")
    assert report["cost"]["cost_model_version"] == coefficients.version()
    assert report["cost"]["cached_bytes"] == e.split.cached_bytes
    html = (run_dir / "report.html").read_text()
    assert f'data-value="cost.usb3.total_ms">{e.time("usb3").total_ms:.1f}<' in html

    # A Coral owner's `edge bench --json` of the compiled model, carried into the run: measured beside predicted.
    compiled = run_dir / "model_int8_edgetpu.tflite"
    compiled.write_bytes((REFERENCE / "mobilenet_v1_0.25_128_quant_edgetpu.tflite").read_bytes())
    manifest = record_artifact(run_dir, "model_int8_edgetpu", compiled)
    measured = 3.25
    bench = latency_document(compiled.name, manifest["artifacts"]["model_int8_edgetpu"]["sha256"], "tflite_runtime", True,
                             None, 100, 9.0, measured, 3.5, 0, None)
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    from click.testing import CliRunner

    from pipeline.cli import main
    result = CliRunner().invoke(main, ["report", str(run_dir), "--latency", str(tmp_path / "bench.json")])
    assert result.exit_code == 0, result.output
    html = (run_dir / "report.html").read_text()
    table = html[html.index('data-table="predicted"'):]
    table = table[:table.index("</table>")]
    for device in ("usb3", "devboard"):
        predicted = e.time(device).total_ms
        assert f'data-device="{device}"' in table
        assert f"<td>{predicted:.2f}</td><td>{measured:.2f}</td><td>{100 * (predicted / measured - 1):+.1f}%</td>" in table


def test_a_cpu_measurement_is_shown_beside_the_prediction_but_not_called_its_error(tmp_path):
    run_dir = _reference_run(tmp_path)
    assert _compile(run_dir, "--check-only").exit_code == 0
    sha = json.loads((run_dir / "manifest.json").read_text())["artifacts"]["model_int8"]["sha256"]
    bench = latency_document("model_int8.tflite", sha, "ai_edge_litert", False, 1, 100, 9.0, 4.0, 4.5, 0, None)
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    from click.testing import CliRunner

    from pipeline.cli import main
    assert CliRunner().invoke(main, ["report", str(run_dir), "--latency", str(tmp_path / "bench.json")]).exit_code == 0
    html = (run_dir / "report.html").read_text()
    table = html[html.index('data-table="predicted"'):]
    table = table[:table.index("</table>")]
    assert 'data-comparable="no"' in table and "prediction off by" not in table and "%" not in table
    assert "no: a CPU time" in table and "Measured on the CPU interpreter (ai_edge_litert" in html


def test_a_model_larger_than_the_chip_is_split_between_cached_and_streamed(tmp_path):
    pytest.importorskip("tensorflow")
    import tf_keras as keras

    from tests.support.helpers import int8_tflite
    inputs = keras.Input((8, 8, 3), batch_size=1)
    x = keras.layers.Flatten()(keras.layers.Conv2D(64, 1)(inputs))
    x = keras.layers.Dense(1500)(x)  # 6.1M weights: cached
    x = keras.layers.Dense(2000)(x)  # 3.0M more: past the chip's capacity, streamed
    path = tmp_path / "big.tflite"
    path.write_bytes(int8_tflite(keras.Model(inputs, x), 8))
    e = _estimate(path)
    assert e.split.cached_bytes > 5 * 2**20 and e.split.streamed_bytes > 2 * 2**20
    assert e.split.cached_bytes <= e.split.capacity_bytes
    assert e.split.streamed_ops == [max(o.index for o in e.cost.ops if o.op == "FULLY_CONNECTED")]


def test_a_detector_s_decoding_and_nms_are_priced_per_box_on_the_host():
    path = REPO / "tests" / "fixtures" / "tiny_detector_int8.tflite"  # ends in TFLite_Detection_PostProcess
    e = _estimate(path)
    boxes = next(read_model(path).tensor(t).shape[1] for t in read_model(path).ops[-1].inputs)
    per_box = coefficients.load()["host_decode"]["ms_per_1000_boxes"] / 1000
    assert e.time("usb3").host_decode_ms == pytest.approx(per_box * boxes)
    assert _estimate(REFERENCE / "mobilenet_v1_0.25_128_quant.tflite").time("usb3").host_decode_ms == 0


def test_a_model_the_compiler_would_refuse_gets_no_estimate_and_the_gate_says_so(tmp_path):
    from tests.support.helpers import int8_tflite
    pytest.importorskip("tensorflow")
    import tf_keras as keras
    inputs = keras.Input((8, 8, 3))  # batch left dynamic: the compiler refuses dynamic-sized tensors
    path = tmp_path / "dynamic.tflite"
    path.write_bytes(int8_tflite(keras.Model(inputs, keras.layers.Conv2D(4, 3)(inputs)), 8, batch=None))
    assert _estimate(path) is None
    result = _compile(path, "--check-only", "--max-latency-ms", "5")
    assert "cost model: no estimate, the compiler is expected to refuse the model" in result.output
    assert result.exit_code == 1 and "fix what the pre-flight names first" in result.output
