"""Per-class precision, recall, F1 and macro-F1 (edge/answers/metrics.py) against scikit-learn: the function itself, train's
held-out metrics, parity's report and its macro-F1 gate, and `edge evaluate`'s output."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

pytestmark = pytest.mark.host


def _sklearn(truth, predicted):
    """scikit-learn's numbers with its defaults (labels: those in truth or predictions; zero_division "warn" = 0)."""
    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import f1_score, precision_recall_fscore_support

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        macro = f1_score(truth, predicted, average="macro")
        precision, recall, f1, support = precision_recall_fscore_support(truth, predicted)
    labels = sorted(set(np.asarray(truth).tolist()) | set(np.asarray(predicted).tolist()))
    return macro, {c: (p, r, f, s) for c, p, r, f, s in zip(labels, precision, recall, f1, support)}


def _assert_matches_sklearn(report, truth, predicted, num_classes):
    macro, per_class = _sklearn(truth, predicted)
    assert report["macro_f1"] == macro
    assert report["classes_averaged"] == len(per_class)
    for c in range(num_classes):
        got = (report["precision"][c], report["recall"][c], report["f1"][c], report["support"][c])
        if c in per_class:
            assert got == tuple(per_class[c]), f"class {c}"
        else:  # absent from truth and predictions: no numbers, not averaged
            assert got == (None, None, None, 0), f"class {c}"


@pytest.mark.parametrize("seed", range(40))
def test_class_report_equals_scikit_learn(seed):
    from edge.answers.metrics import class_counts, class_report, macro_f1_exact

    rng = np.random.default_rng(seed)
    num_classes = int(rng.integers(2, 12))
    n = int(rng.integers(1, 80))
    # Classes missing from the truth, classes never predicted, classes absent from both: all occur across seeds.
    truth = rng.integers(0, max(1, num_classes - 2), n)
    predicted = np.where(rng.random(n) < 0.6, truth, rng.integers(0, num_classes - 1, n))
    report = class_report(truth, predicted, num_classes)
    _assert_matches_sklearn(report, truth, predicted, num_classes)
    assert abs(float(macro_f1_exact(class_counts(truth, predicted, num_classes))) - report["macro_f1"]) < 1e-12


def test_class_report_refuses_ids_outside_the_classes():
    from edge.errors import InputError
    from edge.answers.metrics import class_report

    with pytest.raises(InputError, match="predicted class 3, expected a class id in 0..2"):
        class_report([0, 1], [0, 3], 3)
    with pytest.raises(InputError, match="2 true labels and 1 predictions"):
        class_report([0, 1], [0], 3)


@pytest.mark.slow
def test_train_records_held_out_per_class_metrics_of_its_predictions(exported_run):
    import tensorflow as tf

    from pipeline import data
    from pipeline.rundir import manifest as manifest_mod
    from pipeline.rundir.run import Run

    manifest = manifest_mod.load(exported_run)
    images, labels = data.load_split(Run.open(exported_run), "heldout")  # decoded as training decodes them
    serve = tf.saved_model.load(str(exported_run / "saved_model")).signatures["serving_default"]
    predicted = next(iter(serve(tf.constant(images, tf.float32)).values())).numpy().argmax(axis=1)
    metrics = manifest["metrics"]
    _assert_matches_sklearn(metrics["heldout_per_class"], labels, predicted, 10)
    assert metrics["heldout"]["macro_f1"] == metrics["heldout_per_class"]["macro_f1"]
    assert 0 < metrics["heldout"]["macro_f1"] < 1  # a tiny model: imperfect, so the comparison means something


def _predictions(run_dir):
    """float SavedModel and int8 (ai_edge_litert directly) top-1 on the held-out files through the pixel contract."""
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from edge.pixels import preprocess
    from pipeline.data.heldout import heldout_examples
    from pipeline.rundir.run import Run

    heldout = heldout_examples(Run.open(run_dir))
    pixels = np.stack([preprocess.load_pixels(o, (heldout.size, heldout.size)) for o in heldout.originals])
    serve = tf.saved_model.load(str(run_dir / "saved_model")).signatures["serving_default"]
    float_top1 = next(iter(serve(tf.constant(pixels, tf.float32)).values())).numpy().argmax(axis=1)
    interpreter = Interpreter(model_path=str(run_dir / "model_int8.tflite"))
    interpreter.allocate_tensors()
    inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    assert inp["quantization"] == (1 / 128, 128)  # Coral's grid: raw bytes are the normalized input, they go in unchanged
    int8_top1 = []
    for image in pixels:
        interpreter.set_tensor(inp["index"], image[None].astype(inp["dtype"]))
        interpreter.invoke()
        int8_top1.append(int(interpreter.get_tensor(out["index"])[0].argmax()))
    return np.array([e.label for e in heldout.examples]), float_top1, np.array(int8_top1)


def test_parity_report_per_class_f1_equals_scikit_learn(exported_copy):
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["parity", str(exported_copy), "--gate-metric", "macro_f1", "--max-drop", "100",
                                       "--min-agreement", "0"])
    assert result.exit_code == 0, result.output
    assert "macro-F1 drop <= 100 pp" in result.output
    report = json.loads((exported_copy / "parity" / "report.json").read_text())
    assert report["gate"]["metric"] == "macro_f1"
    labels, float_top1, int8_top1 = _predictions(exported_copy)
    for name, predicted in (("float_savedmodel", float_top1), ("int8_cpu", int8_top1)):
        _assert_matches_sklearn(report["models"][name]["per_class"], labels, predicted, 10)
    _, ref = _sklearn(labels, float_top1)
    _, int8 = _sklearn(labels, int8_top1)
    deltas = report["models"]["int8_cpu"]["per_class_f1_delta_pp"]
    for c in range(10):
        assert deltas[c] == pytest.approx((int8[c][2] - ref[c][2]) * 100, abs=1e-9)
    assert "## Per-class F1" in (exported_copy / "parity" / "report.md").read_text()
    assert json.loads((exported_copy / "manifest.json").read_text())["parity"]["int8_cpu"]["macro_f1"] == \
        report["models"]["int8_cpu"]["macro_f1"]


def _models(truth, reference, answered, num_classes):
    from pipeline import gate
    from pipeline.tasks.classify.parity import compare

    eye = np.eye(num_classes, dtype=np.float32)
    ref_scores = eye[reference]
    return {gate.REFERENCE: compare(ref_scores, ref_scores, truth, 1, num_classes),
            "int8_cpu": compare(eye[answered], ref_scores, truth, 1, num_classes)}


def _gate(models, max_drop, metric="top1"):
    """The gate on parity's model entries as parity applies it, agreement left out."""
    from pipeline import gate

    scores = {name: gate.classification_scores(m) for name, m in models.items()}
    return gate.check(scores, gate.GateLimits(max_drop, 0.0, metric), gate.CLASSIFICATION)


def test_macro_f1_gate_counts_exactly():
    """200 images, 2 classes: the float model right on all, the int8 model wrong on one of each class. Its F1 is
    198/200 = 0.99 for both classes, so macro-F1 drops by exactly 1 pp: --max-drop 1 passes, 0.99 fails. In floats
    the drop is (1 - 0.99) * 100 = 1.0000000000000009, which a float comparison would call a failure."""
    truth = np.array([0] * 100 + [1] * 100)
    answered = truth.copy()
    answered[0], answered[100] = 1, 0
    models = _models(truth, truth, answered, 2)
    assert models["int8_cpu"]["macro_f1"] == 0.99 and (1.0 - 0.99) * 100 > 1  # where floats would get it wrong
    assert _gate(models, 1.0, "macro_f1") == []
    failures = _gate(models, 0.99, "macro_f1")
    assert failures == ["int8_cpu: macro-F1 drop 1.00 pp (1.0000 -> 0.9900) exceeds --max-drop 0.99 pp"]


def test_gate_metric_chooses_what_max_drop_limits():
    """A model that keeps top-1 accuracy but gives up a small class: the top-1 gate passes, the macro-F1 gate fails."""
    truth = np.array([0] * 45 + [1] * 45 + [2] * 10)
    reference = truth.copy()
    reference[:2] = 1  # the float model: 2 mistakes on class 0
    answered = truth.copy()
    answered[90:92] = 0  # the int8 model: 2 mistakes on the small class 2 instead
    models = _models(truth, reference, answered, 3)
    assert models["int8_cpu"]["drop_images"] == 0 and models["int8_cpu"]["macro_f1_drop_pp"] > 1
    top1, macro = _gate(models, 1.0), _gate(models, 1.0, "macro_f1")
    assert top1 == [] and len(macro) == 1 and macro[0].startswith("int8_cpu: macro-F1 drop")


def test_edge_evaluate_reports_per_class_metrics_of_its_predictions(exported_run, tmp_path):
    from PIL import Image
    from sklearn.datasets import load_digits

    from click.testing import CliRunner

    from edge.cli import main

    digits = load_digits()
    rng = np.random.default_rng(0)
    for i in rng.choice(len(digits.target), 60, replace=False):
        folder = tmp_path / "data" / str(digits.target[i])
        folder.mkdir(parents=True, exist_ok=True)
        pixels = np.round(digits.images[i] * (255 / 16)).astype(np.uint8)
        Image.fromarray(pixels).convert("RGB").save(folder / f"{i:04d}.png")
    out = tmp_path / "predictions.json"
    result = CliRunner().invoke(main, ["evaluate", str(exported_run / "model_int8.tflite"), "--data", str(tmp_path / "data"),
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    truth = [written["labels"].index(p["file"].split("/")[0]) for p in written["predictions"]]
    predicted = [int(np.argmax(p["scores"])) for p in written["predictions"]]
    _assert_matches_sklearn(written["classes"], truth, predicted, 10)
    assert f"macro-F1 {written['classes']['macro_f1']:.4f}" in result.output


@pytest.mark.slow
def test_pipeline_run_passes_the_gate_metric_to_parity(exported_copy):
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["run", "--out", str(exported_copy), "--gate-metric", "macro_f1", "--max-drop", "100",
                                       "--min-agreement", "0"])
    assert result.exit_code == 0, result.output
    assert "gate (macro-F1 drop <= 100 pp" in result.output and "macro-F1" in result.output.split("== summary")[1]
    assert json.loads((exported_copy / "parity" / "report.json").read_text())["gate"]["metric"] == "macro_f1"
