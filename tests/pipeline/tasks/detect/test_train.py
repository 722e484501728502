"""`--task detect` through the stages: `pipeline train` trains the detector with the same machinery as a
classifier and records what later stages need; `pipeline prepare` writes detection TFRecords training reads
back; the loss is normalized by the whole global batch's positive anchors across replicas."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

from tests.support.detect_trained import CALIBRATION_SAMPLES, DATA, SIZE, detector_once  # noqa: E402
from tests.support.helpers import REPO, cli, copy_of, quiet_env, tree_snapshot  # noqa: E402

pytestmark = [pytest.mark.host, pytest.mark.slow]



@pytest.fixture(scope="module")
def detect_run(session_folder):
    """The session's detector as `pipeline train --task detect` left it (tests/support/detect_trained.py), and what that
    command printed. Shared read-only: a test that changes it works on a copy."""
    built = detector_once(session_folder)
    return built.trained, built.printed


def test_train_records_the_task_the_anchors_and_coco_scores(detect_run):
    run_dir, printed = detect_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["task"] == "detect"
    assert manifest["labels"] == ["square", "circle", "triangle", "cross"]
    anchors = manifest["detection"]["anchors"]
    assert set(anchors) == {"strides", "base_sizes", "scales", "aspect_ratios"}
    from pipeline.tasks.detect.heads.ssd.anchors import AnchorSpec, anchors as make_anchors

    spec = AnchorSpec(**{k: tuple(v) for k, v in anchors.items()})
    assert len(make_anchors(SIZE, spec)) == manifest["detection"]["anchor_count"]
    heldout = manifest["metrics"]["heldout"]
    assert 0 <= heldout["map"] <= heldout["map50"] <= 1
    assert f"mAP@.5 {heldout['map50']:.4f}" in printed  # printed as recorded
    assert set(manifest["metrics"]["heldout_per_class"]) == set(manifest["labels"])
    assert manifest["training"]["steps_per_epoch"] == manifest["data"]["split"]["train_examples"] // 16


def test_heldout_split_is_recorded_by_identity(detect_run):
    from pipeline.data import Split
    from pipeline.tasks.detect.data.specs import open_detection

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

    from pipeline.tasks.detect.heads.ssd.model import build_detector
    from pipeline.data import Split
    from pipeline.tasks.detect.heads.ssd.anchors import AnchorSpec, anchors
    from pipeline.tasks.detect.evaluate import evaluate
    from pipeline.tasks.detect.heads.ssd.infer import predict
    from pipeline.tasks.detect.data.specs import open_detection

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
    before = tree_snapshot(run_dir)
    result = cli(["run", "--task", "classify", "--out", str(run_dir)])
    assert result.returncode == 1, result.stderr[-2000:]
    assert "--task classify (the run has detect)" in result.stderr
    assert tree_snapshot(run_dir) == before  # refused before anything was written


def test_loss_normalized_by_the_global_batch_adds_up_across_replicas():
    """Two halves of a batch, each divided by the whole batch's positive count, sum to the whole batch's loss:
    what every replica computes under a strategy, summed by the optimizer."""
    import tensorflow as tf

    from pipeline.tasks.detect.heads.ssd.loss import detection_loss

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
    from pipeline.tasks.detect.data.coco import read_coco, write_coco
    from pipeline.tasks.detect.data.shapes import shapes
    from pipeline.tasks.detect.data.tfrecords import read_tfrecords

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


@pytest.fixture(scope="module")
def exported_run(session_folder):
    """A copy of the trained run, exported float and int8 (what parity and predict read): the session's
    (tests/support/detect_trained.py), shared read-only; a test that changes it works on a copy."""
    return detector_once(session_folder).exported


def test_export_compile_preflight_and_parity_of_a_detection_run(exported_run, tmp_path):
    from edge.model.tflite_file import read_model

    run_dir = copy_of(exported_run, tmp_path)  # parity writes its report into the run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {"model_float", "model_int8"} <= set(manifest["artifacts"])
    assert manifest["artifacts"]["model_int8"]["calibration"]["samples"] == CALIBRATION_SAMPLES
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


def test_parity_after_the_int8_export_alone_as_for_a_classifier(detect_run, tmp_path):
    """`pipeline export RUN --int8` then `pipeline parity RUN` works as it does for a classifier (tests/pipeline/test_parity.py):
    the float reference is the SavedModel; the float TFLite row appears only when that model was exported."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(detect_run[0], run_dir)
    result = cli(["export", str(run_dir), "--int8", "--calibration-samples", "16"], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    result = cli(["parity", str(run_dir)], timeout=600)
    assert "no model_float" not in result.stderr and (run_dir / "parity" / "report.json").is_file(), result.stderr[-3000:]
    report = json.loads((run_dir / "parity" / "report.json").read_text())
    assert set(report["models"]) == {"float_savedmodel", "int8_cpu"}
    assert result.returncode == (0 if report["gate"]["passed"] else 1), result.stderr[-2000:]


def test_the_report_of_an_exported_detection_run_knows_its_task(exported_run):
    """The stage bar says export done (a detector writes no quantization.json), classes are counted in objects (the
    manifest's objects per class, not "n/a"), and the training plot has no accuracy panel (a detector has none)."""
    import re

    html = (exported_run / "report.html").read_text()
    manifest = json.loads((exported_run / "manifest.json").read_text())
    assert re.search(r'<li class="done" data-stage="export">', html), re.findall(r'<li class="\w+" data-stage="\w+">', html)
    table = html[html.index('<table class="numbers classes">'):]
    table = table[:table.index("</table>")]
    assert "training objects" in table and "n/a" not in table
    identity = manifest["data"]["identity"]
    for name, train, heldout in zip(identity["classes"], identity["train"]["objects_per_class"], identity["heldout"]["objects_per_class"]):
        assert f"<td>{name}</td><td>{train}</td><td>{heldout}</td>" in table
    assert 'alt="loss and learning rate per epoch"' in html
    assert 'data-value="quantization.int8_bytes"' in html  # the int8 export's size, not "has not run yet"


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


def heldout_as_coco(folder):
    """The held-out images as a COCO folder (annotations.json, category ids from 1) and their files."""
    from pipeline.data import Split
    from pipeline.tasks.detect.data.coco import write_coco
    from pipeline.tasks.detect.data.examples import DetSource
    from pipeline.tasks.detect.data.specs import open_detection

    source = open_detection(DATA)
    # shapes' ids have no suffix; as files a user hands to predict, they are PNGs
    heldout = [source.examples[i]._replace(id=source.examples[i].id + ".png") for i in source.indices("heldout", Split(0.2, 1234))]
    write_coco(DetSource("heldout", "shapes", source.labels, heldout), folder / "annotations.json")
    return heldout, source.labels, [folder / e.id for e in heldout]


@pytest.fixture(scope="module")
def heldout_coco(tmp_path_factory):
    """`heldout_as_coco` written once for the predict tests, which only read it (1.5 s of CPU a copy)."""
    folder = tmp_path_factory.mktemp("coco")
    return (folder, *heldout_as_coco(folder))


@pytest.mark.parametrize("model", ["float", "int8"])
def test_predict_writes_coco_results_that_cocoeval_scores_as_the_device_reads_them(exported_run, heldout_coco, tmp_path, model):
    """`pipeline predict` on unlabeled held-out images: COCOeval, given the ground truth written as COCO with its
    own ids, scores the file as the same detector's objects read on the device and scored in memory."""
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from edge.answers.detect import detect_file, open_detector
    from pipeline.tasks.detect.evaluate import Detections, evaluate

    coco, heldout, labels, files = heldout_coco
    before = (exported_run / "manifest.json").read_bytes()
    out = tmp_path / "results.json"
    result = cli(["predict", str(exported_run), "--data", str(coco / "shapes"), "--out", str(out), "--model", model])
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"wrote {out}: {len(files)} predictions (coco results json)" in result.stdout
    rows = json.loads(out.read_text())
    assert rows and set(rows[0]) == {"image_id", "file_name", "category_id", "category", "bbox", "score"}
    assert (exported_run / "manifest.json").read_bytes() == before  # predict only reads the run

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(coco / "annotations.json"))
        ids = {img["file_name"]: img["id"] for img in gt.dataset["images"]}
        names = {c["id"]: c["name"] for c in gt.dataset["categories"]}
        assert all(names[r["category_id"]] == r["category"] for r in rows)
        # The folder was given: the ids are paths inside it, COCO's file names less the folder's own name.
        dt = gt.loadRes([{**r, "image_id": ids[next(k for k in ids if k.endswith("/" + r["file_name"]))]} for r in rows])
        scored = COCOeval(gt, dt, "bbox")
        scored.evaluate()
        scored.accumulate()
        scored.summarize()
    detector = open_detector(exported_run / ("model_float.tflite" if model == "float" else "model_int8.tflite"))
    found = []
    for e, path in zip(heldout, files):
        objects = detect_file(detector, path, threshold=0.0)
        found.append(Detections(np.array([[o.box.ymin / e.height, o.box.xmin / e.width, o.box.ymax / e.height,
                                           o.box.xmax / e.width] for o in objects], np.float32).reshape(-1, 4),
                                np.array([o.id for o in objects]), np.array([o.score for o in objects], np.float32)))
    expected = evaluate(heldout, found, labels)
    assert scored.stats[1] == pytest.approx(expected.map50, abs=0.002) and scored.stats[0] == pytest.approx(expected.map, abs=0.002)
    assert expected.map50 > 0.3  # a trained detector: the comparison is of found objects, not of two empty lists


@pytest.mark.parametrize("args, needle", [
    (["--top-k", "3"], "--top-k applies to classification runs"),
    (["--format", "csv"], "a detection run writes COCO results JSON; expected a .json file"),
    (["--batch-size", "8"], "--batch-size apply to a classification run's SavedModel"),
    (["--model", "edgetpu"], "has no model_int8_edgetpu; run `pipeline compile RUN` first"),
])
def test_predict_refuses_what_a_detection_run_does_not_take(exported_run, heldout_coco, tmp_path, args, needle):
    files = heldout_coco[3]
    out = tmp_path / "results.json"
    result = cli(["predict", str(exported_run), "--data", str(files[0]), "--out", str(out), *args])
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert needle in result.stderr and not out.exists()


def test_predict_refuses_them_without_importing_tensorflow(exported_run, heldout_coco, tmp_path):
    """The refusals above answer before TensorFlow is imported (tests/pipeline/test_console.py checks other commands'), in one
    process: each refused, and TensorFlow still not loaded after the last."""
    out = tmp_path / "results.json"
    cases = [["predict", str(exported_run), "--data", str(heldout_coco[3][0]), "--out", str(out), *args]
             for args in (["--top-k", "3"], ["--format", "csv"], ["--batch-size", "8"], ["--model", "edgetpu"])]
    code = ("import sys\nfrom click.testing import CliRunner\nfrom pipeline.cli import main\n"
            f"for args in {cases!r}:\n    print(CliRunner().invoke(main, args).exit_code)\n"
            "print('tensorflow' in sys.modules)")
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=quiet_env(), cwd=REPO,
                             timeout=300, check=True).stdout.split()
    assert printed == ["1", "1", "1", "1", "False"], printed
    assert not out.exists()


def test_predict_names_an_image_it_cannot_read_and_skips_it_when_asked(exported_run, heldout_coco, tmp_path):
    files = heldout_coco[3]
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not an image")
    out = tmp_path / "results.json"
    args = ["predict", str(exported_run), "--data", str(files[0]), "--data", str(bad), "--out", str(out)]
    result = cli(args)
    assert result.returncode == 1 and "Traceback" not in result.stderr and "broken.png" in result.stderr, result.stderr[-2000:]
    assert not out.exists()
    result = cli([*args, "--skip-bad"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "skipped:" in result.stderr and "broken.png" in result.stderr
    assert {r["image_id"] for r in json.loads(out.read_text())} == {0}


def test_bundle_edge_evaluate_and_parity_device_results_of_a_detection_run(exported_run, tmp_path):
    """Bundle -> `edge evaluate` of the int8 detector (CPU here; the Edge TPU on a board) -> parity --device-results:
    the device's objects are scored by the same COCOeval and gated like the int8 model's."""
    import shutil

    from click.testing import CliRunner

    from edge.cli import main as edge_main

    run_dir = tmp_path / "run"
    shutil.copytree(exported_run, run_dir)
    bundle = tmp_path / "bundle"
    result = cli(["parity", str(run_dir), "--bundle", str(bundle)])
    assert result.returncode == 0, result.stderr[-3000:]
    entries = json.loads((bundle / "bundle.json").read_text())["images"]
    recorded = json.loads((run_dir / "manifest.json").read_text())["data"]["identity"]["heldout"]["examples"]
    assert [e["id"] for e in entries] == [r[0] for r in recorded] and {e["label"] for e in entries} == {None}
    predictions = tmp_path / "predictions.json"
    out = CliRunner().invoke(edge_main, ["evaluate", str(bundle / "model_int8.tflite"), "--data", str(bundle), "--out", str(predictions)])
    assert out.exit_code == 0, out.output
    assert f"{len(entries)} images" in out.output
    result = cli(["parity", str(run_dir), "--device-results", str(predictions)], timeout=600)
    report = json.loads((run_dir / "parity" / "report.json").read_text())
    models = report["models"]
    # The device decoded the same originals by the same contract through the same model: the same objects.
    assert models["device_cpu"]["map50"] == pytest.approx(models["int8_cpu"]["map50"], abs=1e-4)
    assert models["device_cpu"]["agreement"] == pytest.approx(models["int8_cpu"]["agreement"], abs=1e-9)
    assert models["device_cpu"]["device"]["model"] == "model_int8"
    assert report["gate"]["applies_to"] == ["int8_cpu", "device_cpu"]
    assert result.returncode == (0 if report["gate"]["passed"] else 1), result.stderr[-2000:]
    assert "device_cpu" in result.stdout
    assert report["gate"]["floor"]["no_skill"]["map50"] < models["float_savedmodel"]["map50"]
    html = (run_dir / "report.html").read_text()
    assert 'alt="precision-recall curves at IoU 0.5, one per model"' in html
    assert "parity is in its own section above" in html  # the task says where (Task.report_parity_section)
    assert len(models["int8_cpu"]["precision_at_recall_50"]) == 101
    # The thumbnails are the images where a model and float differ, by the agreement's own rule.
    shown = {d["model"] for d in report["disagreements"]}
    assert shown <= {"int8_cpu", "device_cpu"}
    assert models["int8_cpu"]["agreement"] == 1 or "int8_cpu" in shown  # a float detection int8 missed is drawn

    document = json.loads(predictions.read_text())
    for change, needle in ((dict(document, predictions=document["predictions"][::-1]), "the device evaluated other images"),
                           (dict(document, model_sha256="0" * 64), "not this run's model_int8 or model_int8_edgetpu"),
                           ({k: v for k, v in document.items() if k != "task"}, "has scores None")):
        predictions.write_text(json.dumps(change))
        result = cli(["parity", str(run_dir), "--device-results", str(predictions)])
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert needle in result.stderr


# --- COCO whose images live in other folders (--images) -------------------------------------------

def _coco_elsewhere(root):
    """COCO 2017's layout from `shapes`: annotations/instances_{train,val}.json, the images in train/ and val/ beside
    them, each file_name relative to its image folder, not to the JSON's."""
    from pipeline.tasks.detect.data.coco import write_coco
    from pipeline.tasks.detect.data.examples import DetSource
    from pipeline.tasks.detect.data.shapes import shapes

    source = shapes(60, size=48, seed=7)
    (root / "annotations").mkdir(parents=True)
    for name, part in (("train", source.examples[12:]), ("val", source.examples[:12])):
        write_coco(DetSource(name, "coco", source.labels, part), root / name / "annotations.json")
        (root / name / "annotations.json").rename(root / "annotations" / f"instances_{name}.json")
    return root / "annotations" / "instances_train.json", root / "annotations" / "instances_val.json"


def test_train_export_and_prepare_from_coco_whose_images_live_elsewhere(tmp_path):
    from pipeline.tasks.detect.data.heldout import recorded_heldout
    from pipeline.tasks.detect.data.coco import read_coco
    from pipeline.tasks.detect.data.tfrecords import read_tfrecords
    from pipeline.rundir.run import Run

    train_json, val_json = _coco_elsewhere(tmp_path / "coco")
    images = ["--images", str(tmp_path / "coco" / "train"), "--images", str(tmp_path / "coco" / "val")]
    without = cli(["train", "--task", "detect", "--data", str(train_json), "--epochs", "1", "--out", str(tmp_path / "refused")])
    assert without.returncode == 1 and "not found in" in without.stderr and "an --images folder" in without.stderr
    assert not (tmp_path / "refused").exists()

    run_dir = tmp_path / "run"
    result = cli(["train", "--task", "detect", "--data", str(train_json), "--val-data", str(val_json), *images, "--image-size", "32",
                  "--epochs", "1", "--batch-size", "16", "--no-tensorboard", "--out", str(run_dir)], timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    run = Run.open(run_dir)
    assert run.data.images == (str(tmp_path / "coco" / "train"), str(tmp_path / "coco" / "val"))
    assert run.training.config["images"] == list(run.data.images)
    assert (run.data.split["train_examples"], run.data.split["heldout_examples"]) == (48, 12)
    # Later stages read the data again through the recorded folders: the held-out images, checked by identity...
    assert [e.id for e in recorded_heldout(run)] == [e for e, _ in run.data.identity["heldout"]["examples"]]
    # ... and int8 calibration on training images.
    exported = cli(["export", str(run_dir), "--int8", "--calibration-samples", "8"], timeout=600)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert json.loads((run_dir / "manifest.json").read_text())["artifacts"]["model_int8"]["calibration"]["samples"] == 8

    out = tmp_path / "records"
    prepared = cli(["prepare", "--task", "detect", str(val_json), *images, "--out", str(out)])
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    coco = read_coco(val_json, images=[str(tmp_path / "coco" / "val")])
    records = read_tfrecords(str(out / "*.tfrecord"))
    assert sorted((e.id, e.digest) for e in records.examples) == sorted((e.id, e.digest) for e in coco.examples)


def test_resume_refuses_other_images_folders(tmp_path):
    from pipeline.training.config import TrainConfig

    train_json, _ = _coco_elsewhere(tmp_path / "coco")
    state = tmp_path / "run" / ".train_state"
    state.mkdir(parents=True)
    started = TrainConfig(data=str(train_json), task="detect", images=(str(tmp_path / "coco" / "train"),), image_size=32)
    (state / "config.json").write_text(json.dumps(started.as_dict()))  # what train saved when it started
    (state / "history.json").write_text(json.dumps([{"epoch": 1, "loss": 1.0}]))  # and an epoch it completed
    (tmp_path / "elsewhere").mkdir()
    result = cli(["train", "--task", "detect", "--data", str(train_json), "--images", str(tmp_path / "elsewhere"),
                  "--images", str(tmp_path / "coco" / "train"), "--image-size", "32", "--out", str(tmp_path / "run")])
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "cannot resume" in result.stderr and "images: saved [" in result.stderr
    assert json.loads((state / "config.json").read_text()) == started.as_dict()  # the state to resume from is kept


# --- resume after an interruption ----------------------------------------------------------------

# The child: `pipeline ARGS`, printing a digest of the model's weights and the optimizer's step count after each
# epoch's checkpoint is saved and when training begins (after a resumed run restored its checkpoint).
RESUME_CHILD = textwrap.dedent("""
    import hashlib, os, sys
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import numpy as np
    import tf_keras as keras

    def state(model):
        weights = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()[:16]
        return f"weights {weights} step {int(model.optimizer.iterations)}"

    Callback = keras.callbacks.BackupAndRestore
    backup, begin = Callback._backup, Callback.on_train_begin

    def saved(self, epoch, batch=0):
        backup(self, epoch, batch)
        print(f"checkpoint of epoch {epoch + 1}: {state(self.model)}", flush=True)

    def began(self, logs=None):
        begin(self, logs)
        print(f"training begins: {state(self.model)}", flush=True)

    Callback._backup, Callback.on_train_begin = saved, began
    sys.argv = ["pipeline", *sys.argv[1:]]
    from pipeline.__main__ import main
    main()
""")


def _train_child(args, stop=None):
    """Run the child; with `stop`, send it that signal once it prints "epoch 1/..." (in the second epoch's training)."""
    proc = subprocess.Popen([sys.executable, "-c", RESUME_CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env=quiet_env(), start_new_session=True)  # signalled alone
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if stop and line.startswith("epoch 1/"):
                os.kill(proc.pid, stop)
                break
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    return proc.returncode, "".join(lines) + out, err


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_an_interrupted_detection_run_resumes_from_its_last_epoch(tmp_path, stop):
    from pipeline.rundir.run import Run

    run_dir = tmp_path / "run"
    args = ["train", "--task", "detect", "--data", "shapes?count=96&size=64", "--image-size", "64", "--epochs", "3",
            "--batch-size", "16", "--out", str(run_dir)]
    code, out, err = _train_child(args, stop)
    assert code == (-signal.SIGKILL if stop == signal.SIGKILL else 143), err[-2000:]
    if stop == signal.SIGTERM:
        assert "terminated (SIGTERM)" in err and "Traceback" not in err, err[-2000:]
    assert not (run_dir / "manifest.json").exists()
    first = json.loads((run_dir / ".train_state" / "history.json").read_text())
    assert [e["epoch"] for e in first] == [1]
    saved = next(line for line in out.splitlines() if line.startswith("checkpoint of epoch 1: "))

    code, out, err = _train_child(args)
    assert code == 0, out[-2000:] + err[-3000:]
    assert "resuming from epoch 1 of 3" in out and "epoch 1/3" not in out
    # Training went on from the weights and the optimizer step of epoch 1's checkpoint, not from new ones.
    began = next(line for line in out.splitlines() if line.startswith("training begins: "))
    assert began.split(": ", 1)[1] == saved.split(": ", 1)[1]
    run = Run.open(run_dir)
    assert began.endswith(f" step {run.training.get('steps_per_epoch')}")
    history = json.loads(run.artifact("history").read_text())
    assert [e["epoch"] for e in history] == [1, 2, 3] and history[0] == first[0]
    assert [bool(e.get("resumed")) for e in history] == [False, True, False]
    assert run.heldout_metrics["map50"] is not None and run.has("heldout_detections")
    assert not (run_dir / ".train_state").exists()


def test_parity_of_a_detection_run_rows_each_client_and_gates_the_named_ones(exported_run, tmp_path):
    """Each known detector client gets a row in report.json, the manifest, the summary and report.html; --clients gates
    the named ones (here under an mAP@.5 floor no model reaches, so each gated name fails on its own row and the
    others do not); an unknown name is refused with the list expected."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(exported_run, run_dir)
    result = cli(["parity", str(run_dir), "--clients", "pycoral,tensorflowjs"])
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "unknown client tensorflowjs; expected a comma-separated list of pycoral, mediapipe, frigate" in result.stderr
    result = cli(["parity", str(run_dir), "--clients", "pycoral,frigate", "--min-accuracy", "0.999"], timeout=600)
    assert result.returncode == 1, result.stderr[-3000:]
    report = json.loads((run_dir / "parity" / "report.json").read_text())
    clients, models = report["clients"], report["models"]
    assert list(clients) == ["edgeflow", "pycoral", "mediapipe", "frigate"]
    for name, c in clients.items():
        assert "refused" not in c and c["images"] == models["int8_cpu"]["images"], c
        assert c["gated"] == (name in ("pycoral", "frigate"))
        assert c["drop_pp"] == pytest.approx((models["float_savedmodel"]["map50"] - c["map50"]) * 100)
        # The held-out pictures are the model's size: no client resizes them, only the boxes' rounding differs.
        assert c["map50"] == pytest.approx(models["int8_cpu"]["map50"], abs=0.02), name
    assert clients["edgeflow"]["map50"] == pytest.approx(models["int8_cpu"]["map50"], abs=1e-4)  # the int8 row's own feed
    failures = report["gate"]["failures"]
    assert {f.split(":")[0] for f in failures} == {"float_savedmodel", "int8_cpu", "client_pycoral", "client_frigate"}, failures
    assert report["gate"]["applies_to"] == ["int8_cpu", "client_pycoral", "client_frigate"]
    manifest = json.loads((run_dir / "manifest.json").read_text())["parity"]
    assert {n: c["map50"] for n, c in manifest["clients"].items()} == {n: c["map50"] for n, c in clients.items()}
    assert manifest["passed"] is False
    assert "int8 as pycoral" in result.stdout and "worst client: " in result.stdout and "(gated)" in result.stdout
    html = (run_dir / "report.html").read_text()
    for name, c in clients.items():
        assert f'data-value="detection.client.{name}.map50">{c["map50"]:.4f}' in html
