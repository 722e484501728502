"""`pipeline parity` and `pipeline run`: the gate, the reports, the device round trip, end to end."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.support.helpers import forget_artifact, record_artifact

pytestmark = pytest.mark.host


def _pipeline(*args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def run_copy(exported_run, tmp_path):
    shutil.copytree(exported_run, tmp_path / "run")
    return tmp_path / "run"


def test_trained_tiny_model_passes_the_gate(run_copy):
    result = _pipeline("parity", run_copy)
    assert result.exit_code == 0, result.output
    assert "gate" in result.output and "PASSED" in result.output
    report = json.loads((run_copy / "parity" / "report.json").read_text())
    assert set(report["models"]) == {"float_savedmodel", "float_tflite_cpu", "int8_cpu"}
    assert report["models"]["float_tflite_cpu"]["agreement"] == 1.0  # same float math, another runtime
    assert report["models"]["int8_cpu"]["agreement"] >= 0.98
    assert report["heldout"]["images"] == json.loads((run_copy / "manifest.json").read_text())["data"]["split"]["heldout_examples"]
    assert (run_copy / "parity" / "report.md").read_text().startswith("# Accuracy parity")
    assert (run_copy / "parity" / "confusion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from pipeline.rundir.run import Run

    run = Run.open(run_copy)
    run.artifact("parity_report")
    assert run.manifest["parity"]["passed"] is True


def _scramble_int8_weights(run_dir):
    """Shuffle the bytes of the int8 model's largest weight tensor in place, and re-record the file,
    as if a broken quantizer had produced it: the manifest is consistent, the model is not."""
    from ai_edge_litert.interpreter import Interpreter

    from edge.model.tflite_file import read_model
    from pipeline.rundir import manifest as manifest_mod

    path = run_dir / "model_int8.tflite"
    data = bytearray(path.read_bytes())
    info = read_model(bytes(data))
    weights = max((t for t in info.tensors if t.is_constant and t.dtype == "int8"), key=lambda t: t.buffer_size)
    interpreter = Interpreter(model_content=bytes(data))
    raw = interpreter.get_tensor(weights.index).tobytes()
    at = bytes(data).find(raw)
    assert at > 0 and bytes(data).find(raw, at + 1) == -1, "weights must be found exactly once"
    data[at:at + len(raw)] = np.random.default_rng(0).permutation(np.frombuffer(raw, np.int8)).tobytes()
    path.write_bytes(bytes(data))
    manifest = manifest_mod.load(run_dir)
    record_artifact(run_dir, "model_int8", path, **{k: v for k, v in manifest["artifacts"]["model_int8"].items() if k not in ("path", "sha256")})
    return weights.name


def test_scrambled_int8_weights_fail_the_gate_and_name_the_limit(run_copy):
    from pipeline import gate

    _scramble_int8_weights(run_copy)
    result = _pipeline("parity", run_copy)
    assert result.exit_code == 1
    assert gate.FAILED in result.output
    assert "int8_cpu: accuracy drop" in result.output and "exceeds --max-drop 1 pp" in result.output
    assert "is under --min-agreement 0.98" in result.output
    report = json.loads((run_copy / "parity" / "report.json").read_text())
    assert report["gate"]["passed"] is False  # the reports are written even when the gate fails


def _gate(models, max_drop=1.0, min_agreement=0.98, metric="top1", metrics=None):
    from pipeline import gate
    from pipeline.tasks.classify.scores import METRICS

    return gate.check(models, gate.GateLimits(max_drop, min_agreement, metric), metrics or METRICS)


def _counted(images, correct, agree, ref_correct):
    """A gated model's scores beside the reference's: (correct, agreeing) of `images`, the reference right on `ref_correct`."""
    from pipeline.gate import REFERENCE, Score

    return {REFERENCE: {"top1": Score.counted(ref_correct, images), "agreement": Score.counted(images, images)},
            "model": {"top1": Score.counted(correct, images), "agreement": Score.counted(agree, images)}}


def _as(name, models):
    return {name if key == "model" else key: value for key, value in models.items()}


def test_the_gate_counts_images_and_names_each_limit_on_its_own():
    # 95 -> 94 of 100 images is a 1 pp drop: exactly at --max-drop 1, which allows it (in floats: 1.0000000000000009).
    assert _gate(_as("int8_cpu", _counted(100, 94, 99, 95)), min_agreement=0.99) == []
    failures = _gate(_as("int8_cpu", _counted(100, 93, 99, 95)), min_agreement=0.99)
    assert failures == ["int8_cpu: accuracy drop 2.00 pp (2 of 100 images) exceeds --max-drop 1 pp"]
    failures = _gate(_as("int8_cpu", _counted(100, 95, 97, 95)), min_agreement=0.98)
    assert failures == ["int8_cpu: agreement 0.9700 (97 of 100 images) is under --min-agreement 0.98"]
    # A device run is gated like the int8 model; the float reference and float TFLite are not.
    models = _as("device_cpu", _counted(10, 8, 8, 10))
    models["float_tflite_cpu"] = _counted(10, 0, 0, 10)["model"]
    assert [f.split(":")[0] for f in _gate(models)] == ["device_cpu", "device_cpu"]


def test_the_floor_comes_first_and_applies_to_the_reference_too():
    from pipeline import gate
    from pipeline.gate import Floor
    from pipeline.tasks.classify.chance import majority
    from pipeline.tasks.classify.scores import METRICS

    chance = majority([0] * 6 + [1] * 4, ["a", "b"])  # always answering "a" gets 6 of 10
    models = _as("int8_cpu", _counted(10, 3, 5, 6))
    failures = gate.check(models, gate.GATE, METRICS, Floor(chance, None, METRICS["top1"]))
    assert [f.split(":")[0] for f in failures] == ["float_savedmodel", "int8_cpu", "int8_cpu", "int8_cpu"]
    assert failures[0] == ("float_savedmodel: top-1 0.6000 (6 of 10 images) is no better than always answering the most "
                           "frequent held-out class, 0.6000 (6 of 10 images, always answering 'a')")
    assert gate.check(models, gate.GATE, METRICS, Floor(chance, 0.3, METRICS["top1"]))[0].startswith("int8_cpu: accuracy drop")


def test_the_gate_takes_another_tasks_metric_without_knowing_it():
    """A second task names its own metric (here mAP@.5, an exact value with no count of images) and its agreement:
    the same gate compares them, exactly, and words the failure with the task's names."""
    from fractions import Fraction

    from pipeline.gate import REFERENCE, Metric, Score

    metrics = {"map50": Metric("map50", "mAP@.5", "mAP@.5")}
    models = {REFERENCE: {"map50": Score(Fraction(3, 4), 0.75), "agreement": Score.counted(50, 50, "boxes")},
              "int8_cpu": {"map50": Score(Fraction(37, 50), 0.74), "agreement": Score.counted(48, 50, "boxes")}}
    assert _gate(models, max_drop=1.0, min_agreement=0.96, metric="map50", metrics=metrics) == []  # exactly 1 point: allowed
    failures = _gate(models, max_drop=0.5, min_agreement=0.97, metric="map50", metrics=metrics)
    assert failures == ["int8_cpu: mAP@.5 drop 1.00 pp (0.7500 -> 0.7400) exceeds --max-drop 0.5 pp",
                        "int8_cpu: agreement 0.9600 (48 of 50 boxes) is under --min-agreement 0.97"]


def test_a_limit_out_of_range_is_refused_before_any_work(tmp_path):
    """`pipeline run` checks its gate limits before it trains: nothing is written."""
    result = _pipeline("run", "--out", tmp_path / "run", "--min-agreement", "2")
    assert result.exit_code == 1 and "--min-agreement 2.0, expected a share between 0 and 1" in result.output
    assert not (tmp_path / "run").exists()


def test_bundle_round_trip_through_edge_evaluate(run_copy, tmp_path):
    """Bundle -> `edge evaluate` (CPU here; the Edge TPU on a device) -> parity --device-results."""
    from click.testing import CliRunner

    from edge.cli import main as edge_main

    bundle = tmp_path / "bundle"
    result = _pipeline("parity", run_copy, "--bundle", bundle)
    assert result.exit_code == 0, result.output
    entries = json.loads((bundle / "bundle.json").read_text())["images"]
    recorded = json.loads((run_copy / "manifest.json").read_text())["data"]["identity"]["heldout"]["examples"]
    assert [(e["id"], e["label"]) for e in entries] == [(r[0], r[1]) for r in recorded]
    predictions = tmp_path / "predictions.json"
    out = CliRunner().invoke(edge_main, ["evaluate", str(bundle / "model_int8.tflite"), "--data", str(bundle), "--out", str(predictions)])
    assert out.exit_code == 0, out.output
    result = _pipeline("parity", run_copy, "--device-results", predictions)
    assert result.exit_code == 0, result.output
    models = json.loads((run_copy / "parity" / "report.json").read_text())["models"]
    # The device decoded and resized the same originals by the same contract, through the same model.
    assert models["device_cpu"]["agreement"] == models["int8_cpu"]["agreement"]
    assert models["device_cpu"]["score_error_max"] == pytest.approx(models["int8_cpu"]["score_error_max"], abs=1e-6)


def test_device_results_from_another_model_are_refused(run_copy, tmp_path):
    from click.testing import CliRunner

    from edge.cli import main as edge_main

    bundle = tmp_path / "bundle"
    assert _pipeline("parity", run_copy, "--bundle", bundle).exit_code == 0
    predictions = tmp_path / "predictions.json"
    CliRunner().invoke(edge_main, ["evaluate", str(bundle / "model_int8.tflite"), "--data", str(bundle), "--out", str(predictions)])
    results = json.loads(predictions.read_text())
    manifest = json.loads((run_copy / "manifest.json").read_text())
    # Another model, and a model of this run that a bundle never ships (the float one): both refused.
    for sha in ("0" * 64, manifest["artifacts"]["model_float"]["sha256"]):
        predictions.write_text(json.dumps(dict(results, model_sha256=sha)))
        result = _pipeline("parity", run_copy, "--device-results", predictions)
        assert result.exit_code == 1 and "not this run's model_int8 or model_int8_edgetpu" in result.output
    # The right model on other images (an older bundle, or a shuffled one): refused by the example's identity.
    swapped = results["predictions"][1:2] + results["predictions"][0:1] + results["predictions"][2:]
    predictions.write_text(json.dumps(dict(results, predictions=swapped)))
    result = _pipeline("parity", run_copy, "--device-results", predictions)
    assert result.exit_code == 1 and "the device evaluated other images" in result.output


def test_classify_on_a_jpeg_gives_the_top1_parity_computes(run_copy, tmp_path):
    from click.testing import CliRunner
    from PIL import Image

    from edge.cli import main as edge_main
    from pipeline import data
    from pipeline.tasks.classify.parity import tflite_scores
    from pipeline.rundir.run import Run

    images, labels = data.load_split(Run.open(run_copy), "heldout")
    jpeg = tmp_path / "digit.jpg"
    Image.fromarray(images[0]).save(jpeg, quality=95)
    decoded = np.asarray(Image.open(jpeg).convert("RGB"))
    contract = Run.open(run_copy).contract_of("model_int8")
    host = tflite_scores(run_copy / "model_int8.tflite", decoded[None], contract, threads=None)[0]
    result = CliRunner().invoke(edge_main, ["classify", str(run_copy / "model_int8.tflite"), str(jpeg), "--top-k", "1"])
    assert result.exit_code == 0, result.output
    expected = int(host.argmax())
    # edge classify prints "<image>:" then one "  <score>  <label>  (id <id>)" line per class.
    lines = result.output.splitlines()
    top = lines[lines.index(f"{jpeg}:") + 1].split()
    assert top[-1] == f"{expected})" and top[1] == Run.open(run_copy).labels[expected], result.output


def test_parity_without_int8_model_says_what_to_run(tmp_path, exported_run):
    run_dir = tmp_path / "run"
    shutil.copytree(exported_run, run_dir)
    forget_artifact(run_dir, "model_int8")
    result = _pipeline("parity", run_dir)
    assert result.exit_code == 1
    assert "pipeline export RUN --int8" in result.output
    assert not (run_dir / "parity").exists()


def test_parity_after_the_int8_export_alone_compares_it_with_the_savedmodel(tmp_path, exported_run):
    """`pipeline export RUN --int8` then `pipeline parity RUN`: the float TFLite model is optional (its row appears when
    exported), as for a detection run (tests/pipeline/tasks/detect/test_train.py)."""
    run_dir = tmp_path / "run"
    shutil.copytree(exported_run, run_dir)
    forget_artifact(run_dir, "model_float")
    (run_dir / "model_float.tflite").unlink()
    result = _pipeline("parity", run_dir)
    report = json.loads((run_dir / "parity" / "report.json").read_text())
    assert set(report["models"]) == {"float_savedmodel", "int8_cpu"}, result.output
    assert result.exit_code == (0 if report["gate"]["passed"] else 1), result.output
    assert "float_tflite_cpu" not in result.output and "int8_cpu" in result.output


@pytest.mark.slow
def test_pipeline_run_end_to_end_as_the_readme_says(session_folder):
    from tests.support.readme_run import readme_run_once

    built = readme_run_once(session_folder)  # its exit code 0 is checked where it is built, once per session
    for stage in ("== train", "== export int8", "== compile", "== parity", "== summary"):
        assert stage in built.printed
    manifest = json.loads((built.run / "manifest.json").read_text())
    for key in ("saved_model", "model_float", "model_int8", "edgetpu_report", "parity_report"):
        assert key in manifest["artifacts"]
    # The target: int8 held-out accuracy within 1 percentage point of the float model.
    assert manifest["parity"]["float_savedmodel"]["top1"] - manifest["parity"]["int8_cpu"]["top1"] <= 0.01
    assert manifest["parity"]["passed"] is True
    # What this command gives with the flatten head of `pipeline run`'s digits recipe: int8 0.9818, float 0.9818
    # (0.9375 and 0.9401 with the averaging head before it, bench/results/digits_demo.md), every op predicted on the
    # Edge TPU. The README promises a float top-1 of at least 0.98 and int8 within the gate.
    assert manifest["parity"]["float_savedmodel"]["top1"] >= 0.98
    assert manifest["parity"]["int8_cpu"]["top1"] >= 0.975
    preflight = json.loads((built.run / "edgetpu.json").read_text())["preflight"]
    assert preflight["ops_on_edgetpu"] == preflight["total_ops"] > 0


def test_bundle_refuses_a_compiled_model_older_than_the_int8_model(run_copy, tmp_path):
    """A compiled model recorded from an earlier int8 export must not ship beside the new one."""
    compiled = run_copy / "model_int8_edgetpu.tflite"
    compiled.write_bytes((run_copy / "model_int8.tflite").read_bytes())  # stands in for a compiled file
    record_artifact(run_copy, "model_int8_edgetpu", compiled, compiled_from="0" * 64)
    result = _pipeline("parity", run_copy, "--bundle", tmp_path / "bundle")
    assert result.exit_code == 1
    assert "was compiled from an earlier int8 model" in result.output and "pipeline compile RUN" in result.output
    assert not (tmp_path / "bundle").exists()
