"""`pipeline import --task pose`: an Ultralytics YOLOv8n-pose ONNX imported with its decoding tail cut.

- The cut is found by the graph's structure with the keypoint branch as its third convolution per stride, and the
  wrapper's map of Ultralytics' raw keypoints into edgeflow's offsets decodes to Ultralytics' own keypoints (numbers
  only, no model).
- A real YOLOv8n-pose built from its yaml with the figures' 7 keypoints, trained one epoch by Ultralytics on `figures`
  written in YOLO-pose layout and exported format=onnx, in the side venv .ci/ultralytics-env builds (or
  EDGEFLOW_ULTRALYTICS_PYTHON): import, export --int8 with every op predicted on the Edge TPU, parity against
  onnxruntime's own decoded output (bench/importing/yolo/pose.py measures it longer and larger).

Each test skips naming what is missing (onnx, onnxruntime, onnx2tf; the Ultralytics venv).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support.helpers import cli, quiet_env
from tests.pipeline.importing.test_onnx import _missing, converter  # noqa: F401

pytestmark = pytest.mark.host


def write_figures_yolo_pose(root: Path, count: int, size: int, seed: int) -> Path:
    """`count` images of the built-in `figures` in Ultralytics' YOLO-pose layout (data.yaml with kpt_shape and flip_idx,
    images/, labels/); its data.yaml."""
    import yaml

    from pipeline.tasks.pose.data.figures import KEYPOINTS, figures

    source = figures(count, size, seed)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    (root / "data.yaml").write_text(yaml.safe_dump({"names": list(source.labels), "kpt_shape": [len(KEYPOINTS), 3],
                                                    "flip_idx": list(source.layout.flip_idx), "kpt_names": list(KEYPOINTS)}))
    for e in source.examples:
        name = e.id.replace("/", "_").replace("?", "_").replace("&", "_").replace("=", "_")
        (root / "images" / f"{name}.png").write_bytes(e.image)
        lines = []
        for (y0, x0, y1, x1), c, points in zip(e.boxes, e.classes, e.keypoints):
            kp = " ".join(f"{x:.6f} {y:.6f} {int(v)}" for x, y, v in points)
            lines.append(f"{c} {(x0 + x1) / 2:.6f} {(y0 + y1) / 2:.6f} {x1 - x0:.6f} {y1 - y0:.6f} {kp}")
        (root / "labels" / f"{name}.txt").write_text("".join(line + "\n" for line in lines))
    return root / "data.yaml"


ULTRALYTICS_SCRIPT = """
import sys
from ultralytics import YOLO

data, out, size, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model = YOLO("yolov8n-pose.yaml")  # built from its yaml (nc and kpt_shape from the data): no weights downloaded
model.train(data=data, epochs=epochs, imgsz=size, batch=16, workers=0, device="cpu", plots=False, amp=False, val=False,
            project=out, name="train", exist_ok=True, seed=0, close_mosaic=max(1, epochs // 3), warmup_epochs=1,
            verbose=False)
model.export(format="onnx", imgsz=size, opset=17, simplify=True, dynamic=False)
"""


def train_ultralytics_pose(python: str, root: Path, size: int, epochs: int, train_count: int, val_count: int) -> dict:
    """figures in YOLO-pose layout under root/train and root/val, a YOLOv8n-pose trained on it and exported as ONNX by
    Ultralytics; {"train": data.yaml, "val": data.yaml, "onnx": the file}."""
    import yaml

    train = write_figures_yolo_pose(root / "train", train_count, size, 0)
    val = write_figures_yolo_pose(root / "val", val_count, size, 1)
    doc = yaml.safe_load(train.read_text())
    spec = root / "ultralytics.yaml"
    spec.write_text(yaml.safe_dump({"path": str(root.resolve()), "train": "train/images", "val": "val/images",
                                    "names": doc["names"], "kpt_shape": doc["kpt_shape"], "flip_idx": doc["flip_idx"]}))
    env = {**quiet_env(), "YOLO_OFFLINE": "1", "YOLO_CONFIG_DIR": str(root / "settings")}
    done = subprocess.run([python, "-c", ULTRALYTICS_SCRIPT, str(spec), str(root / "runs"), str(size), str(epochs)],
                          capture_output=True, text=True, env=env, cwd=root, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"train": train, "val": val, "onnx": root / "runs" / "train" / "weights" / "best.onnx"}


def test_raw_keypoints_map_to_offsets_that_decode_as_ultralytics_does():
    """Ultralytics decodes a raw keypoint r of cell i as (2 r + i) * stride; edgeflow's decoding adds the offset in strides
    to the cell's centre (i + 0.5) * stride: the wrapper's map 2 r - 0.5 gives the same pixel, visibility unchanged."""
    from edge.answers.heads.yolo import anchor_points
    from pipeline.tasks.pose.heads.yolo.import_wrap import keypoint_map

    size, k = 64, 2
    centres, strides = anchor_points(size, size)  # [N, 2] x, y pixels; [N, 1]
    rng = np.random.default_rng(0)
    raw = rng.normal(0, 2, (len(centres), 3 * k)).astype(np.float32)
    scale, shift = keypoint_map(k)
    ours = (raw * scale + shift).reshape(len(centres), k, 3)
    decoded = centres[:, None, :] + ours[..., :2] * strides[:, :, None]
    cells = centres / strides - 0.5  # the cell's column and row
    theirs = (raw.reshape(len(centres), k, 3)[..., :2] * 2.0 + cells[:, None, :]) * strides[:, :, None]
    np.testing.assert_allclose(decoded, theirs, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(ours[..., 2], raw.reshape(len(centres), k, 3)[..., 2])


def test_a_detector_or_a_file_of_another_kind_is_refused_naming_a_pose_model(converter, tmp_path):
    """The ONNX import checks for its converter before it reads the model (`converter`: installed as the import says)."""
    from tests.pipeline.importing.test_refusals import _refused
    from tests.support.yolo_onnx import yolo_onnx

    data = "figures?count=20&size=64"
    detector = yolo_onnx(tmp_path / "detector.onnx", size=64, classes=1)
    _refused([detector, "--task", "pose", "--data", data], tmp_path / "r1", "has shape (1, 5, 84)",
             "expected (1, 4 + C + 21, 84)", "i.e. an Ultralytics pose model as format=onnx writes it")
    keras_file = tmp_path / "model.keras"
    keras_file.write_bytes(b"PK")
    _refused([keras_file, "--task", "pose", "--data", data], tmp_path / "r2", "--task pose imports an ONNX pose model")


@pytest.fixture(scope="module")
def ultralytics_python(tmp_path_factory) -> str:
    from tests.support.device_env import shared_env

    given = os.environ.get("EDGEFLOW_ULTRALYTICS_PYTHON")
    return given or str(shared_env(tmp_path_factory, "ultralytics-env") / "bin" / "python")


@pytest.fixture(scope="module")
def made(ultralytics_python, tmp_path_factory) -> dict:
    return train_ultralytics_pose(ultralytics_python, tmp_path_factory.mktemp("ultra_pose"), size=64, epochs=1,
                                  train_count=48, val_count=12)


def test_the_keypoint_branch_is_cut_by_structure(made):
    if _missing("onnx"):
        pytest.skip("the tail's recognition needs onnx in this environment (pip install -e '.[import]')")
    import onnx

    from pipeline.tasks.detect.heads.yolo import onnx_tail

    model = onnx.load(str(made["onnx"]))
    found = onnx_tail.find(model, "m.onnx", extra_channels=21)
    assert (found.num_classes, found.image_size, len(found.extra)) == (1, 64, 3)
    onnx_tail.cut(model, found, made["onnx"].parent / "cut.onnx", extra_name="keypoints")
    outputs = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim]
               for o in onnx.load(str(made["onnx"].parent / "cut.onnx")).graph.output}
    assert outputs["keypoints_s8"] == [1, 21, 8, 8] and outputs["keypoints_s32"] == [1, 21, 2, 2], outputs
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="0 last convolutions give"):  # a pose model read as a detector is refused
        onnx_tail.find(model, "m.onnx")


def _ok(args):
    done = cli([str(a) for a in args], timeout=1800)
    assert done.returncode == 0, f"{args[:2]}: {done.stdout[-1500:]}{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
def test_ultralytics_yolov8n_pose_imports_maps_fully_and_keeps_its_answers(converter, made, tmp_path):
    run = tmp_path / "run"
    wrong = cli(["import", str(made["onnx"]), "--task", "detect", "--data", str(made["train"]), "--out", str(tmp_path / "r")])
    assert wrong.returncode == 1 and "0 last convolutions give (1, 22, 8, 8)" in wrong.stderr, wrong.stderr[-1500:]
    assert not (tmp_path / "r").exists()
    _ok(["import", made["onnx"], "--task", "pose", "--data", made["train"], "--val-data", made["val"], "--out", run])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["task"] == "pose" and manifest["pose"]["head"] == "yolo" and manifest["labels"] == ["figure"]
    assert manifest["pose"]["keypoints"]["count"] == 7 and "clipped" in manifest["pose"]["keypoint_bound"]
    assert manifest["origin"]["input_contract"]["std"] == [255.0] * 3  # Ultralytics' 0..1, read from its metadata
    from PIL import Image

    images = [np.asarray(Image.open(p).convert("RGB")) for p in sorted((made["val"].parent / "images").glob("*.png"))[:3]]
    assert assert_wrapped_answers_as_the_original(run, made["onnx"], images) < 0.05
    _ok(["export", run, "--int8"])
    _ok(["export", run])
    from edge.model.tflite_file import read_model

    info = read_model((run / "model_int8.tflite").read_bytes())
    shapes = sorted(list(map(int, info.tensors[t].shape)) for t in info.outputs)
    assert shapes == [[1, 84, 1], [1, 84, 21], [1, 84, 64]], shapes
    preflight = json.loads(_ok(["compile", run, "--check-only", "--json"]).stdout.strip().splitlines()[-1])
    assert preflight["ops_on_cpu"] == 0 and preflight["percent_on_edgetpu"] == 100.0, preflight
    # One epoch leaves the model near no skill, so parity's gate may fail it: the rows are checked.
    done = cli(["parity", str(run)], timeout=1800)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report = json.loads((run / "parity" / "report.json").read_text())
    assert report["images"] == 12 and set(report["models"]) >= {"float_savedmodel", "int8_cpu"}, report["models"]


def assert_wrapped_answers_as_the_original(run: Path, onnx_path: Path, images) -> float:
    """Every anchor point's decoded box, score and keypoints of the wrapped float model (edgeflow's layout, decoded by
    edgeflow's rules) against the original ONNX file's own decoded output in onnxruntime, on the same pixels; the largest
    keypoint difference in pixels."""
    import onnxruntime
    import tensorflow as tf

    from edge.answers.heads.yolo import anchor_points, boxes_of
    from pipeline.tasks.pose.heads.yolo.import_wrap import load

    model = load(run / "saved_model")
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    worst = 0.0
    for image in images:
        size = image.shape[0]
        ours = {k: v.numpy()[0] for k, v in model(tf.constant(image[None].astype(np.float32))).items()}
        theirs = session.run(None, {session.get_inputs()[0].name: (image.astype(np.float32) / 255.0).transpose(2, 0, 1)[None]})[0][0].T
        centres, strides = anchor_points(size, size)
        corners = boxes_of(ours["box_dist"], centres, strides)
        xywh = np.concatenate([(corners[:, :2] + corners[:, 2:]) / 2, corners[:, 2:] - corners[:, :2]], axis=1)
        np.testing.assert_allclose(xywh, theirs[:, :4], atol=0.05)
        scores = 1 / (1 + np.exp(-ours["class_logits"]))
        inside = np.abs(ours["class_logits"]) < 3.99  # beyond the logits' bound the wrapper clips, as the head does
        np.testing.assert_allclose(scores[inside], theirs[:, 4:5][inside], atol=1e-3)
        k = ours["keypoints"].shape[-1] // 3
        points = ours["keypoints"].reshape(-1, k, 3)
        xy = centres[:, None, :] + points[..., :2] * strides[:, :, None]
        expected = theirs[:, 5:].reshape(-1, k, 3)
        bounded = np.abs(points[..., :2]).max(axis=-1) < 15.99
        np.testing.assert_allclose(xy[bounded], expected[..., :2][bounded], atol=0.05)
        np.testing.assert_allclose(1 / (1 + np.exp(-points[..., 2])), expected[..., 2], atol=1e-3)
        worst = max(worst, float(np.abs(xy[bounded] - expected[..., :2][bounded]).max()))
    return worst
