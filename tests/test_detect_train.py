"""`--task detect` through the stages: `pipeline train` trains the detector with the same machinery as a
classifier and records what later stages need; `pipeline prepare` writes detection TFRecords training reads
back; the loss is normalized by the whole global batch's positive anchors across replicas."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

from tests.helpers import cli  # noqa: E402

pytestmark = pytest.mark.host

DATA = "shapes?count=320&size=128&seed=1"
SIZE = 128


@pytest.fixture(scope="module")
def detect_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("detect") / "run"
    result = cli(["train", "--task", "detect", "--data", DATA, "--image-size", str(SIZE), "--epochs", "12", "--batch-size", "16",
                  "--out", str(run_dir)], timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return run_dir, result


def test_train_records_the_task_the_anchors_and_coco_scores(detect_run):
    run_dir, result = detect_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["task"] == "detect"
    assert manifest["labels"] == ["square", "circle", "triangle", "cross"]
    anchors = manifest["detection"]["anchors"]
    assert set(anchors) == {"strides", "base_sizes", "scales", "aspect_ratios"}
    from pipeline.detection.anchors import AnchorSpec, anchors as make_anchors

    spec = AnchorSpec(**{k: tuple(v) for k, v in anchors.items()})
    assert len(make_anchors(SIZE, spec)) == manifest["detection"]["anchor_count"]
    heldout = manifest["metrics"]["heldout"]
    assert 0 <= heldout["map"] <= heldout["map50"] <= 1
    assert f"mAP@.5 {heldout['map50']:.4f}" in result.stdout  # printed as recorded
    assert set(manifest["metrics"]["heldout_per_class"]) == set(manifest["labels"])
    assert manifest["training"]["steps_per_epoch"] == manifest["data"]["split"]["train_examples"] // 16


def test_heldout_split_is_recorded_by_identity(detect_run):
    from pipeline.data import Split
    from pipeline.detection.specs import open_detection

    run_dir, _ = detect_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    source = open_detection(DATA)
    expected = [[source.examples[i].id, source.examples[i].digest] for i in source.indices("heldout", Split(0.2, 1234))]
    assert manifest["data"]["identity"]["heldout"]["examples"] == expected
    detections = json.loads((run_dir / "heldout_detections.json").read_text())
    assert [image["id"] for image in detections["images"]] == [ident for ident, _ in expected]


def test_training_beats_the_untrained_detector(detect_run):
    """The trained detector's held-out mAP@.5 against the same detector untrained, scored the same way."""
    import tf_keras as keras

    from models.detector import build_detector
    from pipeline.data import Split
    from pipeline.detection.anchors import AnchorSpec, anchors
    from pipeline.detection.evaluate import evaluate
    from pipeline.detection.infer import predict
    from pipeline.detection.specs import open_detection

    run_dir, _ = detect_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    source = open_detection(DATA)
    heldout = [source.examples[i] for i in source.indices("heldout", Split(0.2, 1234))]
    spec = AnchorSpec()
    keras.utils.set_random_seed(1234)
    untrained = build_detector("small_cnn", SIZE, len(source.labels), spec.per_location, strides=spec.strides)
    before = evaluate(heldout, predict(untrained, heldout, anchors(SIZE, spec), SIZE), source.labels)
    trained = keras.models.load_model(str(run_dir / "saved_model"), compile=False)
    after = evaluate(heldout, predict(trained, heldout, anchors(SIZE, spec), SIZE), source.labels)
    assert after.map50 == pytest.approx(manifest["metrics"]["heldout"]["map50"], abs=0.005)  # the saved model is the scored one
    assert after.map50 > before.map50 + 0.15, (before, after)


def test_report_has_the_detection_section(detect_run):
    run_dir, _ = detect_run
    html = (run_dir / "report.html").read_text()
    assert 'id="detection"' in html
    assert html.count("data:image/png;base64,") >= 8  # sample held-out images with their boxes


def test_run_refuses_to_reuse_a_detection_run_as_a_classifier(detect_run):
    run_dir, _ = detect_run
    result = cli(["run", "--task", "classify", "--out", str(run_dir)])
    assert result.returncode == 1, result.stderr[-2000:]
    assert "--task classify (the run has detect)" in result.stderr


def test_loss_normalized_by_the_global_batch_adds_up_across_replicas():
    """Two halves of a batch, each divided by the whole batch's positive count, sum to the whole batch's loss:
    what every replica computes under a strategy, summed by the optimizer."""
    import tensorflow as tf

    from pipeline.detection.loss import detection_loss

    rng = np.random.default_rng(0)
    b, a, c = 6, 50, 4
    class_targets = rng.choice([-1, 0, 0, 0, 1, 2, 3, 4], size=(b, a)).astype(np.int32)
    box_targets = rng.normal(size=(b, a, 4)).astype(np.float32) * (class_targets > 0)[..., None]
    codes = rng.normal(size=(b, a, 4)).astype(np.float32)
    logits = rng.normal(size=(b, a, c + 1)).astype(np.float32)
    whole = detection_loss(*map(tf.constant, (box_targets, class_targets, codes, logits)))
    positives = float((class_targets > 0).sum())
    halves = [detection_loss(*map(tf.constant, (box_targets[s], class_targets[s], codes[s], logits[s])), normalizer=positives)
              for s in (slice(0, 2), slice(2, 6))]
    for k in range(3):
        assert float(halves[0][k] + halves[1][k]) == pytest.approx(float(whole[k]), rel=1e-5)
    # Without the global count each replica divides by its own positives, and the sum is another number.
    own = [detection_loss(*map(tf.constant, (box_targets[s], class_targets[s], codes[s], logits[s]))) for s in (slice(0, 2), slice(2, 6))]
    assert float(own[0][0] + own[1][0]) != pytest.approx(float(whole[0]), rel=1e-3)


def test_detect_trains_under_mirrored_strategy(tmp_path):
    run_dir = tmp_path / "run"
    result = cli(["train", "--task", "detect", "--data", "shapes?count=80&size=32", "--image-size", "32", "--epochs", "1",
                  "--batch-size", "16", "--cpu-replicas", "2", "--no-tensorboard", "--out", str(run_dir)], timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["training"]["strategy"], manifest["training"]["replicas"]) == ("mirrored", 2)
    assert np.isfinite(manifest["metrics"]["final_epoch"]["loss"])


def test_prepare_detect_writes_records_that_read_back_as_the_coco_data(tmp_path):
    from pipeline.detection.coco import read_coco, write_coco
    from pipeline.detection.shapes import shapes
    from pipeline.detection.tfrecords import read_tfrecords

    write_coco(shapes(12, size=48, seed=5), tmp_path / "coco" / "annotations.json")
    out = tmp_path / "records"
    result = cli(["prepare", "--task", "detect", str(tmp_path / "coco" / "annotations.json"), "--out", str(out)])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pipeline train --task detect --data" in result.stdout
    coco, records = read_coco(tmp_path / "coco" / "annotations.json"), read_tfrecords(str(out / "*.tfrecord"))
    assert records.labels == coco.labels
    assert [(e.id, e.digest) for e in records.examples] == [(e.id, e.digest) for e in coco.examples]
    for x, y in zip(records.examples, coco.examples):
        np.testing.assert_allclose(x.boxes, y.boxes, atol=1e-5)
        np.testing.assert_array_equal(x.classes, y.classes)


def test_export_compile_preflight_and_parity_of_a_detection_run(detect_run, tmp_path):
    import shutil

    from edge.tflite_file import read_model

    run_dir = tmp_path / "run"
    shutil.copytree(detect_run[0], run_dir)
    for args in ([], ["--int8", "--calibration-samples", "32"]):
        result = cli(["export", str(run_dir), *args], timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {"model_float", "model_int8"} <= set(manifest["artifacts"])
    assert manifest["artifacts"]["model_int8"]["calibration"]["samples"] == 32
    ops = [op.name for op in read_model((run_dir / "model_int8.tflite").read_bytes()).ops]
    assert ops[-1] == "TFLite_Detection_PostProcess"
    result = cli(["compile", str(run_dir), "--check-only"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ops predicted on the Edge TPU (100%), then 3 post-processing op(s) on the CPU at the end" in result.stderr
    result = cli(["parity", str(run_dir)], timeout=600)
    report = json.loads((run_dir / "parity" / "report.json").read_text())
    models = report["models"]
    assert set(models) == {"float_savedmodel", "float_tflite_cpu", "int8_cpu"}
    # The float TFLite model is the SavedModel with the same post-processing: the same boxes, so the same scores.
    assert models["float_tflite_cpu"]["map50"] == pytest.approx(models["float_savedmodel"]["map50"], abs=0.01)
    assert models["float_tflite_cpu"]["agreement"] >= 0.95
    drop = (models["float_savedmodel"]["map50"] - models["int8_cpu"]["map50"]) * 100
    assert report["gate"]["passed"] == (drop <= 1.0) and result.returncode == (0 if drop <= 1.0 else 1), result.stderr[-2000:]
    assert "int8_cpu" in result.stdout and "gate (mAP@.5 drop <= 1 pp for int8_cpu)" in result.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["parity"]["passed"] == report["gate"]["passed"]


def test_export_refuses_what_a_detection_run_does_not_take(detect_run, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(detect_run[0], run_dir)
    before = (run_dir / "manifest.json").read_bytes()
    for args, needle in ((["--float16"], "--float16 on a detection run; expected float32 (no flag) or --int8"),
                         (["--int8", "--per-tensor"], "--per-tensor apply to classification runs")):
        result = cli(["export", str(run_dir), *args])
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert needle in result.stderr
    assert (run_dir / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("args, needle", [
    (["--model", "xception"], "--task detect: model 'xception' has no detector; expected one of small_cnn, mobilenet_v2"),
    (["--weights", "imagenet"], "--task detect: --weights imagenet for small_cnn; expected 'imagenet' with mobilenet_v2"),
    (["--image-size", "100"], "--task detect: image size 100; expected a multiple of 16"),
    (["--frozen-epochs", "1", "--model", "mobilenet_v2", "--weights", "imagenet"], "--task detect trains the whole detector"),
])
def test_train_detect_refuses_options_it_cannot_honour(args, needle, tmp_path):
    result = cli(["train", "--task", "detect", "--data", "shapes?count=20", *args, "--out", str(tmp_path / "run")])
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert needle in result.stderr
    assert not (tmp_path / "run").exists()
