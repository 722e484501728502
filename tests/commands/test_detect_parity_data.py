"""`pipeline parity RUN --data SPEC` of a detection run, from the command line (issue 55's measure: a detector scored on
a second `shapes` set made with another seed). A tiny detector of each head (32 px, one epoch: the accuracy is not the
point) is scored on new images: the report names the set and its numbers are those images' (their count and objects);
the images it trained on, and a set of other classes, are refused; every form `pipeline train --data` takes is read;
`--bundle --data`, `edge evaluate` and the parity command the bundle prints go together; a run recorded before the
training digests reads its training data again, and says so; an imported detector is scored too, its tuning images
refused."""
from __future__ import annotations

import html
import json
import shlex
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

# The ONNX converter's fixture, as the import tests take it.
from tests.pipeline.importing.test_onnx import converter  # noqa: E402,F401
from tests.support.helpers import cli, copy_of  # noqa: E402

pytestmark = [pytest.mark.host, pytest.mark.slow]

TRAIN = "shapes?count=48&size=32"
NEW = "shapes?count=24&size=32&seed=1"  # the second set: the same drawing, another seed
TINY = ("--image-size", "32", "--epochs", "1", "--batch-size", "8", "--no-tensorboard")
RELAXED = ("--max-drop", "100", "--min-accuracy", "0")  # a one-epoch detector: the verdict is not what is tested


def _ok(args, exits=(0,)):
    done = cli([str(a) for a in args], timeout=900)
    assert done.returncode in exits, f"{args[:2]}: {done.stdout[-1500:]}{done.stderr[-3000:]}"
    return done


def _trained(folder: Path, head: str) -> Path:
    """A tiny detector of `head`, trained on TRAIN and exported int8."""
    run = folder / "run"
    _ok(["train", "--task", "detect", "--head", head, "--data", TRAIN, *TINY, "--out", run])
    _ok(["export", run, "--int8", "--calibration-samples", "8"])
    return run


@pytest.fixture(scope="module")
def ssd(tmp_path_factory) -> Path:
    """The SSD head's tiny detector, shared read-only: a test copies it."""
    return _trained(tmp_path_factory.mktemp("ssd"), "ssd")


@pytest.fixture(scope="module")
def yolo(tmp_path_factory) -> Path:
    """The anchor-free head's tiny detector, shared read-only: a test copies it."""
    return _trained(tmp_path_factory.mktemp("yolo"), "yolo")


def _objects(spec: str) -> int:
    from pipeline.tasks.detect.data.specs import open_detection

    return sum(len(e.boxes) for e in open_detection(spec).examples)


def _report(run: Path) -> dict:
    return json.loads((run / "parity" / "report.json").read_text())


@pytest.mark.parametrize("head", ["ssd", "yolo"])
def test_a_detector_is_scored_on_a_second_shapes_set_and_the_report_names_it(head, request, tmp_path):
    run = copy_of(request.getfixturevalue(head), tmp_path)
    done = _ok(["parity", run, "--data", NEW, *RELAXED])
    report = _report(run)
    objects = _objects(NEW)
    assert report["heldout"] == {"source": NEW, "kind": "shapes", "resolved": NEW, "images": 24, "objects": objects,
                                 "trained_on_checked": True, "checked_against": report["heldout"]["checked_against"],
                                 "tuning_images": 0, "recorded_heldout": 0}
    trained = json.loads((run / "manifest.json").read_text())["data"]["split"]["train_examples"]
    assert report["heldout"]["checked_against"] == f"the {trained} training images' digests the run recorded"
    assert (report["images"], report["objects"]) == (24, objects)
    # The no-skill floor is computed from the held-out boxes: the new set's images, one box each.
    assert report["gate"]["floor"]["no_skill"]["images"] == 24, report["gate"]["floor"]
    line = (f"held-out images: 24 ({objects} objects) from {NEW}; none of them trained or tuned on, by content, "
            f"checked against the {trained} training images' digests the run recorded")
    assert done.stdout.splitlines()[0] == line, done.stdout[:600]
    assert f'<p class="heldout-set">{line}.</p>' in html.unescape((run / "report.html").read_text())
    assert json.loads((run / "manifest.json").read_text())["parity"]["heldout"] == NEW

    _ok(["parity", run, *RELAXED])  # without --data: the recorded split, named so
    recorded = json.loads((run / "manifest.json").read_text())["data"]["split"]["heldout_examples"]
    assert _report(run)["heldout"] == {"source": "the run's recorded held-out split", "resolved": TRAIN,
                                       "images": recorded, "objects": _report(run)["objects"]}


def test_images_it_trained_on_and_other_classes_are_refused(ssd, tmp_path):
    from pipeline.tasks.detect.data.coco import write_coco
    from pipeline.tasks.detect.data.specs import open_detection

    for args in (["--data", TRAIN], ["--data", TRAIN, "--bundle", tmp_path / "bundle"]):
        refused = cli(["parity", str(ssd), *map(str, args)])
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
        assert (f"error: --data {TRAIN}: " in refused.stderr and " images are ones this run trained on, by content "
                "(shapes/00000," in refused.stderr and "another seed, as in shapes?seed=1" in refused.stderr), refused.stderr
    assert not (tmp_path / "bundle").exists()
    source = open_detection(NEW)
    swapped = source._replace(labels=["circle", "square", *source.labels[2:]])
    write_coco(swapped, tmp_path / "swapped" / "annotations.json")
    refused = cli(["parity", str(ssd), "--data", str(tmp_path / "swapped" / "annotations.json")])
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert ("(the same names in another order: class 0 is 'circle', the run's class 0 is 'square')"
            in refused.stderr), refused.stderr


def test_each_form_train_takes_is_a_held_out_set(ssd, tmp_path):
    from pipeline.tasks.detect.data.specs import open_detection
    from pipeline.tasks.detect.data.yolo import write_yolo

    run = copy_of(ssd, tmp_path)
    source = open_detection("shapes?count=6&size=32&seed=2")
    source = source._replace(examples=[e._replace(id=e.id.replace("/", "-") + ".png") for e in source.examples])
    yaml = write_yolo(source, tmp_path / "yolo")
    _ok(["prepare", "--task", "detect", yaml, "--out", tmp_path / "records"])
    # COCO is read the same way (tests/pipeline/tasks/detect/data/test_heldout.py): each form's images, scored.
    for spec, kind in ((yaml, "yolo"), (f"{tmp_path}/records/*.tfrecord", "tfrecord")):
        _ok(["parity", run, "--data", spec, *RELAXED])
        held = _report(run)["heldout"]
        assert (held["source"], held["kind"], held["images"], held["objects"]) == (str(spec), kind, 6, _objects(str(spec)))


def test_bundle_of_a_second_set_edge_evaluate_and_the_parity_it_prints(ssd, tmp_path):
    from click.testing import CliRunner

    from edge.cli import main as edge_main

    run = copy_of(ssd, tmp_path)
    bundle = tmp_path / "bundle"
    done = _ok(["parity", run, "--data", NEW, "--bundle", bundle])
    images = json.loads((bundle / "bundle.json").read_text())["images"]
    assert len(images) == 24
    predictions = tmp_path / "predictions.json"
    out = CliRunner().invoke(edge_main, ["evaluate", str(bundle / "model_int8.tflite"), "--data", str(bundle),
                                         "--out", str(predictions)])  # the CPU here; the Edge TPU on a board
    assert out.exit_code == 0, out.output
    printed = next(line for line in done.stdout.splitlines() if line.startswith("then here: "))
    words = shlex.split(printed[len("then here: "):])
    assert words[:2] == ["pipeline", "parity"] and "--data" in words, printed
    _ok([*[str(predictions) if w == "predictions.json" else w for w in words[1:]], *RELAXED])
    report = _report(run)
    assert report["heldout"]["source"] == NEW and report["models"]["device_cpu"]["map50"] == pytest.approx(
        report["models"]["int8_cpu"]["map50"], abs=1e-4)


def test_a_run_recorded_before_the_training_digests_reads_its_training_data_again(ssd, tmp_path):
    run = copy_of(ssd, tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["data"]["identity"]["train_digests"]  # as `pipeline train` recorded it before
    (run / "manifest.json").write_text(json.dumps(manifest))
    done = _ok(["parity", run, "--data", NEW, *RELAXED])
    assert (f"checked against the {manifest['data']['split']['train_examples']} training images read again from {TRAIN} "
            "(the run records no digests" in done.stdout.splitlines()[0]), done.stdout[:600]
    refused = cli(["parity", str(run), "--data", TRAIN])
    assert refused.returncode == 1 and "images are ones this run trained on" in refused.stderr, refused.stderr[-1500:]


def test_an_imported_detector_is_scored_on_new_images_and_its_tuning_images_are_refused(converter, tmp_path):
    """`pipeline import --task detect` (an Ultralytics-shaped ONNX with random weights, tests/support/yolo_onnx.py) with
    --val-data: a third set is scored, the summary saying what an import cannot know; the --val-data set, a share of
    which the import set aside for tuning, is refused."""
    from tests.pipeline.tasks.detect.heads.yolo.test_import import CLASSES, write_shapes_yolo
    from tests.support.yolo_onnx import yolo_onnx

    data, val, new = (write_shapes_yolo(tmp_path / name, count, 64, seed) for name, count, seed in
                      (("data", 24, 0), ("val", 24, 1), ("new", 12, 2)))
    run = tmp_path / "run"
    _ok(["import", yolo_onnx(tmp_path / "yolo.onnx", size=64, classes=4, names=list(CLASSES)), "--task", "detect",
         "--data", data, "--val-data", val, "--out", run])
    _ok(["export", run, "--int8"])
    done = _ok(["parity", run, "--data", new, *RELAXED])
    report = _report(run)
    held = report["heldout"]
    assert (held["source"], held["images"], held["trained_on_checked"]) == (str(new), 12, True)
    assert report["reference_model"].startswith("the imported model as given (") and "onnxruntime" in report["reference_model"]
    assert "(given to `pipeline import`; what the model trained on before is unknown to edgeflow)" in done.stdout.splitlines()[0]
    tuning = len(json.loads((run / "manifest.json").read_text())["data"]["identity"]["tuning"]["examples"])
    assert held["tuning_images"] == tuning > 0
    refused = cli(["parity", str(run), "--data", str(val)])
    assert refused.returncode == 1 and f"{tuning} of its 24 images are ones this run tuned on, by content" in refused.stderr, \
        refused.stderr[-1500:]
