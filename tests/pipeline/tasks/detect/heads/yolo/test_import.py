"""`pipeline import --task detect`: an Ultralytics YOLO detector's ONNX imported with its decoding tail cut.

- The cut is found by the graph's structure (tests/support/yolo_onnx.py writes Ultralytics' head and tail with random weights,
  no Ultralytics needed); a detector whose tail is not recognised, a classifier's ONNX and a non-ONNX model are
  refused naming what was expected, nothing written (cheap: onnx only, no conversion).
- The whole path on that model (onnx2tf): import, export --int8 in the YOLO head's layout with every op predicted on
  the Edge TPU.
- An Ultralytics YOLOv8n built from its yaml, trained briefly on `shapes` and exported format=onnx, in the side venv
  .ci/ultralytics-env builds (or EDGEFLOW_ULTRALYTICS_PYTHON): import, export --int8, pre-flight, parity against
  onnxruntime's own decoded output (bench/importing/yolo/detect.py measures it at a larger size and longer training).

Each test skips naming what is missing (onnx, onnxruntime, onnx2tf here; the Ultralytics venv).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support.helpers import cli, quiet_env
# The ONNX converter's fixture (skips naming what is missing) and the check it uses, shared with the classifier import.
from tests.pipeline.importing.test_onnx import _missing, converter  # noqa: F401

pytestmark = pytest.mark.host

CLASSES = ("square", "circle", "triangle", "cross")


@pytest.fixture(scope="module")
def onnx_only():
    if _missing("onnx"):
        pytest.skip("the tail's recognition needs onnx in this environment (pip install -e '.[import]')")


def write_shapes_yolo(root: Path, count: int, size: int, seed: int) -> Path:
    """`count` images of the built-in `shapes` in Ultralytics' layout (data.yaml, images/, labels/); its data.yaml."""
    from pipeline.tasks.detect.data.shapes import shapes

    source = shapes(count, size, seed)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    (root / "data.yaml").write_text("names: [" + ", ".join(source.labels) + "]\n")
    for e in source.examples:
        name = e.id.replace("/", "_")
        (root / "images" / f"{name}.png").write_bytes(e.image)
        lines = [f"{c} {(x0 + x1) / 2:.6f} {(y0 + y1) / 2:.6f} {x1 - x0:.6f} {y1 - y0:.6f}"
                 for (y0, x0, y1, x1), c in zip(e.boxes, e.classes)]
        (root / "labels" / f"{name}.txt").write_text("".join(line + "\n" for line in lines))
    return root / "data.yaml"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_shapes_yolo(tmp_path_factory.mktemp("yolo_data"), 40, 64, 0)


def test_the_cut_is_found_by_structure(onnx_only, tmp_path):
    import onnx

    from pipeline.tasks.detect.heads.yolo import onnx_tail as yolo_tail
    from tests.support.yolo_onnx import yolo_onnx

    model = onnx.load(str(yolo_onnx(tmp_path / "m.onnx", size=64, classes=3)))
    cut = yolo_tail.find(model, "m.onnx")
    assert (cut.num_classes, cut.image_size) == (3, 64)
    assert cut.boxes == ["box8", "box16", "box32"] and cut.logits == ["cls8", "cls16", "cls32"]
    assert cut.tail_ops["Softmax"] == 1 and cut.tail_ops["Sigmoid"] == 1 and cut.tail_ops["Conv"] == 1  # the DFL's
    yolo_tail.cut(model, cut, tmp_path / "cut.onnx")
    outputs = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in onnx.load(str(tmp_path / "cut.onnx")).graph.output}
    assert outputs == {"box_s8": [1, 64, 8, 8], "box_s16": [1, 64, 4, 4], "box_s32": [1, 64, 2, 2],
                       "logits_s8": [1, 3, 8, 8], "logits_s16": [1, 3, 4, 4], "logits_s32": [1, 3, 2, 2]}


def test_refusals_name_what_was_expected(onnx_only, converter, data, tmp_path):
    from tests.pipeline.importing.test_onnx import _tiny_onnx
    from tests.pipeline.importing.test_refusals import _refused
    from tests.support.yolo_onnx import yolo_onnx

    undecoded = yolo_onnx(tmp_path / "no_sigmoid.onnx", sigmoid=False)
    _refused([undecoded, "--task", "detect", "--data", data], tmp_path / "r1", "lacks a Sigmoid on the class logits",
             "expected an Ultralytics detector as format=onnx writes it")
    classifier = _tiny_onnx(tmp_path / "classifier.onnx")
    _refused([classifier, "--task", "detect", "--data", data], tmp_path / "r2", "output 'scores' has shape (1, 3)",
             "expected (1, 4 + C, 21) for a 32x32 input")
    keras_file = tmp_path / "model.keras"
    keras_file.write_bytes(b"PK")
    _refused([keras_file, "--task", "detect", "--data", data], tmp_path / "r3", "--task detect imports an ONNX detector")
    other = yolo_onnx(tmp_path / "five.onnx", classes=5)
    _refused([other, "--task", "detect", "--data", data], tmp_path / "r4", "5 class logits")
    named = yolo_onnx(tmp_path / "named.onnx", classes=4, names=["a", "b", "c", "d"])
    _refused([named, "--task", "detect", "--data", data], tmp_path / "r5", "expected the model's classes in its order")
    ours = yolo_onnx(tmp_path / "ours.onnx", classes=4, names=list(CLASSES))
    _refused([ours, "--task", "detect", "--data", data, "--input-range", "-1,1"], tmp_path / "r6",
             "contradicts", "an Ultralytics export that takes RGB 0..1")
    _refused([ours, "--task", "detect", "--data", data, "--fit", "letterbox"], tmp_path / "r7", "--fit letterbox",
             "its own way, which no option sets", "expected --fit stretch")


def _ok(args):
    done = cli([str(a) for a in args], timeout=1800)
    assert done.returncode == 0, f"{args[:2]}: {done.stdout[-1500:]}{done.stderr[-3000:]}"
    return done


def test_a_detector_import_sets_a_share_of_val_data_aside_as_the_tuning_split(data, tmp_path):
    """The data step of `import --task detect --val-data` (no model converted): a seeded share of --val-data is the
    tuning split, recorded by identity, disjoint from the held-out rest; the remedy ladder and parity read them back."""
    from types import SimpleNamespace

    from pipeline import tasks
    from pipeline.tasks.detect.data.heldout import recorded_heldout, recorded_tuning
    from pipeline.import_model import ImportConfig
    from pipeline.rundir.views import DataView
    from pipeline.tasks.detect import tuning as detect_tuning

    val = write_shapes_yolo(tmp_path / "val", 40, 64, 1)
    config = ImportConfig(model=tmp_path / "unused.onnx", data=str(data), task="detect", val_data=str(val))
    record = tasks.get("detect").importer().data(config, list(CLASSES), 64)
    record.pop("heldout_count")
    tuning = [e[0] for e in record["identity"]["tuning"]["examples"]]
    heldout = [e[0] for e in record["identity"]["heldout"]["examples"]]
    assert tuning and heldout and not set(tuning) & set(heldout) and len(tuning) + len(heldout) == 40, (tuning, heldout)
    assert record["split"]["tuning_from"] == "--val-data" and record["split"]["train_examples"] == 40  # all of --data
    run = SimpleNamespace(data=DataView("data", "manifest.json", record), labels=list(CLASSES), image_size=64,
                          dir=tmp_path, contract=SimpleNamespace(load_pixels=lambda image, size, name: np.zeros((*size, 3), np.uint8)))
    assert [e.id for e in recorded_tuning(run)] == tuning and [e.id for e in recorded_heldout(run)] == heldout
    split = detect_tuning.split(run, 0)
    assert split.set_aside and split.from_val and split.ids == tuning and len(split.images) == len(tuning)
    from dataclasses import replace

    from pipeline.errors import DataError

    for name in tuning:  # a copy of each tuning image under another name: some copies fall in the held-out share
        image = val.parent / name
        (image.parent / f"copy-{image.name}").write_bytes(image.read_bytes())
        label = val.parent / "labels" / (image.stem + ".txt")
        (label.parent / f"copy-{label.name}").write_bytes(label.read_bytes())
    with pytest.raises(DataError, match="holds the same image as .*: one fell in the tuning split, the other is held out"):
        tasks.get("detect").importer().data(config, list(CLASSES), 64)
    few = write_shapes_yolo(tmp_path / "few", 3, 64, 2)
    with pytest.raises(DataError, match=r"its 3 image\(s\) were all set aside as the tuning split \(--tuning-fraction 0.99\)"):
        tasks.get("detect").importer().data(replace(config, val_data=str(few), tuning_fraction=0.99), list(CLASSES), 64)
    # The advice ("a smaller --tuning-fraction") on that case: the same 3 images then leave some held out.
    smaller = tasks.get("detect").importer().data(replace(config, val_data=str(few), tuning_fraction=0.25), list(CLASSES), 64)
    assert smaller["heldout_count"] >= 1 and smaller["heldout_count"] + smaller["split"].get("tuning_examples", 0) == 3


def test_the_ladder_says_when_its_few_tuning_images_cannot_judge_the_limit(monkeypatch):
    """The spread of a detector's mAP@.5 drop over its tuning images resampled: none for a candidate that finds what
    the reference finds, pp-sized for one that misses a few images' objects, and then the ladder's note says so."""
    from types import SimpleNamespace

    from pipeline.tasks.detect.evaluate import Detections
    from pipeline.tasks.detect.data.shapes import shapes
    from pipeline.gate import GateLimits
    from pipeline.remedy.ladder import spread_note
    from pipeline.tasks.detect import tuning as detect_tuning
    from pipeline.tasks.detect.tuning import spread

    monkeypatch.setattr(detect_tuning, "SPREAD_RESAMPLES", 20)  # enough to tell none from pp-sized
    examples = shapes(12, 32, 0).examples
    tuning = SimpleNamespace(truth=examples)
    found = [Detections(e.boxes, e.classes, np.ones(len(e.boxes), np.float32)) for e in examples]
    missed = [Detections(np.zeros((0, 4), np.float32), np.zeros(0, np.int32), np.zeros(0, np.float32)) if i % 4 == 0 else d
              for i, d in enumerate(found)]
    labels = list(shapes(1, 32, 0).labels)
    assert spread(found, found, tuning, labels, "map50") == 0.0
    deviation = spread(missed, found, tuning, labels, "map50")
    assert 1.0 < deviation < 30.0, deviation
    note = spread_note(12, deviation, GateLimits(1.0, 0.0, "map50"))
    assert f"on these 12 tuning images the export's map50 drop varies by {deviation:.2f} pp" in note


@pytest.mark.slow
def test_imported_detector_maps_fully_in_the_heads_layout(converter, data, tmp_path):
    """Random weights: what is checked is the int8 file's layout (the head's two outputs, no transpose) and that every op
    is predicted on the Edge TPU (Frigate's reading against `edge detect` is measured in bench/importing/yolo/detect.py)."""
    from tests.support.yolo_onnx import yolo_onnx

    model = yolo_onnx(tmp_path / "yolo.onnx", size=64, classes=4, names=list(CLASSES))
    run = tmp_path / "run"
    _ok(["import", model, "--task", "detect", "--data", data, "--out", run])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["task"] == "detect" and manifest["detection"]["head"] == "yolo"
    assert manifest["origin"]["input_contract"]["std"] == [255.0] * 3  # Ultralytics' 0..1, read from its metadata
    _ok(["export", run, "--int8"])
    from edge.model.tflite_file import read_model

    info = read_model((run / "model_int8.tflite").read_bytes())
    shapes = sorted(list(map(int, info.tensors[t].shape)) for t in info.outputs)
    assert shapes == [[1, 84, 4], [1, 84, 64]], shapes
    assert "TRANSPOSE" not in {op.name for op in info.ops}
    preflight = json.loads(_ok(["compile", run, "--check-only", "--require-full-mapping", "--json"]).stdout.strip().splitlines()[-1])
    assert preflight["ops_on_cpu"] == 0 and preflight["percent_on_edgetpu"] == 100.0
    # predict --model float runs the float TFLite twin, as for a trained detector: refused, naming the export, until
    # `pipeline export RUN` writes it.
    images = data.parent / "images"
    refused = cli(["predict", str(run), "--data", str(images), "--out", str(tmp_path / "f.json")])
    assert refused.returncode == 1 and "run `pipeline export RUN` first" in refused.stderr, refused.stderr[-1500:]
    _ok(["export", run])
    done = _ok(["predict", run, "--data", images, "--out", tmp_path / "f.json"])
    assert ": 40 predictions" in done.stdout and "model_float.tflite (float)" in done.stdout, done.stdout[-800:]
    rows = json.loads((tmp_path / "f.json").read_text())  # COCO results: every object, any score (random weights)
    assert all(set(r) >= {"image_id", "category", "bbox", "score"} and 0 <= r["image_id"] < 40 for r in rows)
    # The remedy ladder judges candidates against the model as given (onnxruntime), as parity does: it runs on an
    # imported detector, which has no Keras model (random weights: whether a rung passes is not the point).
    ladder = cli(["export", str(run), "--int8", "--remedy"], timeout=1800)
    assert ladder.returncode in (0, 1) and "remedy ladder on a tuning split" in ladder.stdout, ladder.stderr[-1500:]


ULTRALYTICS_SCRIPT = """
import sys
from ultralytics import YOLO

data, out, size, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model = YOLO("yolov8n.yaml")  # built from its yaml: no weights downloaded
model.train(data=data, epochs=epochs, imgsz=size, batch=16, workers=0, device="cpu", plots=False, amp=False, val=False,
            project=out, name="train", exist_ok=True, seed=0, close_mosaic=max(1, epochs // 3), warmup_epochs=1,
            verbose=False)
model.export(format="onnx", imgsz=size, opset=17, simplify=True, dynamic=False)
"""


def train_ultralytics(python: str, root: Path, size: int, epochs: int, train_count: int = 400, val_count: int = 100) -> dict:
    """shapes in YOLO layout under root/train and root/val, a YOLOv8n trained on it and exported as ONNX by the user's
    own Ultralytics script; {"train": data.yaml, "val": data.yaml, "onnx": the file}."""
    train = write_shapes_yolo(root / "train", train_count, size, 0)
    val = write_shapes_yolo(root / "val", val_count, size, 1)
    spec = root / "ultralytics.yaml"
    spec.write_text(f"path: {root.resolve()}\ntrain: train/images\nval: val/images\nnames: [{', '.join(CLASSES)}]\n")
    env = {**quiet_env(), "YOLO_OFFLINE": "1", "YOLO_CONFIG_DIR": str(root / "settings")}
    done = subprocess.run([python, "-c", ULTRALYTICS_SCRIPT, str(spec), str(root / "runs"), str(size), str(epochs)],
                          capture_output=True, text=True, env=env, cwd=root, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"train": train, "val": val, "onnx": root / "runs" / "train" / "weights" / "best.onnx"}


@pytest.fixture(scope="module")
def ultralytics_python(tmp_path_factory) -> str:
    from tests.support.device_env import shared_env

    given = os.environ.get("EDGEFLOW_ULTRALYTICS_PYTHON")
    return given or str(shared_env(tmp_path_factory, "ultralytics-env") / "bin" / "python")


@pytest.mark.slow
def test_ultralytics_yolov8n_imports_and_keeps_its_answers(converter, ultralytics_python, tmp_path):
    made = train_ultralytics(ultralytics_python, tmp_path, size=64, epochs=2, train_count=64, val_count=16)
    run = tmp_path / "run"
    _ok(["import", made["onnx"], "--task", "detect", "--data", made["train"], "--val-data", made["val"], "--out", run])
    _ok(["export", run, "--int8"])
    preflight = json.loads(_ok(["compile", run, "--check-only", "--json"]).stdout.strip().splitlines()[-1])
    assert preflight["ops_on_cpu"] == 0, preflight
    # Two epochs leave the model near no skill, so parity's gate (the no-skill floor) may fail it: the rows are checked.
    done = cli(["parity", str(run)], timeout=1800)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report = json.loads((run / "parity" / "report.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    split = manifest["data"]["split"]  # a seeded share of --val-data is the remedy's tuning split, the rest held out
    assert report["images"] == split["heldout_examples"] and split["heldout_examples"] + split["tuning_examples"] == 16
    assert set(report["models"]) >= {"float_savedmodel", "int8_cpu"}
    assert manifest["labels"] == list(CLASSES) and "Softmax" in manifest["origin"]["cut_ops"]  # names from its metadata
