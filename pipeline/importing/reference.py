"""Parity's reference for an imported run: the model as the user gave it (RUN/original/), run by its own library
and fed the same pixels through the recorded input contract, so the report says what the Coral loses against the
model the user brought, not against edgeflow's conversion of it.

    keras       Keras 3 on the .keras / .h5 file
    savedmodel  TensorFlow on the SavedModel folder's serving_default
    onnx        onnxruntime on the .onnx file

A detector's reference (`detections`) is its ONNX file's own decoded output, through the host decoding's NMS.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import numpy as np

from edge.pixels.preprocess import normalization
from pipeline.errors import ManifestError
from pipeline.importing.contract import InputContract

BATCH = 64


def describe(origin: Dict[str, Any]) -> str:
    """One line naming the reference, for the report."""
    runner = {"keras": "Keras", "savedmodel": "TensorFlow", "onnx": "onnxruntime"}.get(origin.get("format"), "?")
    return f"the imported model as given ({origin.get('copy')}, run by {runner})"


def scores(run_dir: Path, origin: Dict[str, Any], images: np.ndarray) -> np.ndarray:
    """The original model's scores [N, classes] of uint8 pixels [N, S, S, 3], checked against the recorded sha256."""
    path = _checked(run_dir, origin)
    contract = input_contract(origin)
    run = {"keras": _keras, "savedmodel": _saved_model, "onnx": _onnx}[origin["format"]](path, origin)
    from pipeline.importing.wrap import prepare

    out = [np.asarray(run(prepare(images[i:i + BATCH].astype(np.float32), contract)), np.float32)
           for i in range(0, len(images), BATCH)]
    return np.concatenate(out)


def _checked(run_dir: Path, origin: Dict[str, Any]) -> Path:
    """The copy of the original in RUN, checked against the sha256 recorded at import."""
    from pipeline.rundir.files import sha256_of

    path = Path(run_dir) / origin["copy"]
    if not path.exists() or sha256_of(path) != origin["sha256"]:
        raise ManifestError(f"{path} is missing or changed since `pipeline import` (sha256 {str(origin['sha256'])[:12]}…); "
                            "expected the imported model as it was recorded: import it again")
    return path


def input_contract(origin: Dict[str, Any]) -> InputContract:
    rec = origin["input_contract"]
    norm = normalization(rec["mean"], rec["std"], rec["normalization"])
    return InputContract(rec["image_size"], rec["layout"], norm, rec["channel_order"], rec["fit"], rec["from"])


def _keras(path: Path, origin):
    from pipeline.importing.keras_file import load

    model = load(path)
    return lambda x: model.predict_on_batch(x)


def _saved_model(path: Path, origin):
    import tensorflow as tf

    fn = tf.saved_model.load(str(path)).signatures["serving_default"]
    name = origin["input_name"]
    return lambda x: next(iter(fn(**{name: tf.constant(x)}).values())).numpy()


def _onnx(path: Path, origin):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    fixed = origin["input_shape"][0] == 1
    if fixed:  # a batch-1 model: one image at a time
        return lambda x: np.concatenate([session.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])
    return lambda x: session.run(None, {name: x})[0]


def detections(run_dir: Path, origin: Dict[str, Any], images) -> list:
    """An imported detector's own answers on uint8 pixels [S, S, 3]: the original ONNX file in onnxruntime, its decoded
    output (1, 4 + C, N) (xywh in input pixels, class scores) through the host decoding's rules (one class per box,
    its score filter, class-agnostic NMS, the best 25: edge/answers/heads/yolo.py's Settings), as the detect task's
    Detections with boxes normalized to the input."""
    from edge.answers.heads import yolo as yolo_decode
    from pipeline.tasks.detect.evaluate import Detections
    from pipeline.importing.wrap import prepare

    path = _checked(run_dir, origin)
    contract = input_contract(origin)
    session = _onnx(path, origin)
    settings = yolo_decode.Settings()
    found = []
    for image in images:
        out = np.asarray(session(prepare(np.asarray(image, np.float32)[None], contract)), np.float32)[0].T  # [N, 4 + C]
        height, width = image.shape[:2]
        scores_all = out[:, 4:]
        best = np.argmax(scores_all, axis=1)
        scores = scores_all[np.arange(len(best)), best]
        keep = np.flatnonzero(scores >= settings.score_threshold)
        cx, cy, w, h = (out[keep, k] for k in range(4))
        corners = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1).astype(np.float32)
        chosen = yolo_decode.nms(corners, scores[keep], settings.iou_threshold, settings.max_detections)
        xyxy = corners[chosen] / np.array([width, height, width, height], np.float32)
        found.append(Detections(np.clip(xyxy[:, [1, 0, 3, 2]], 0.0, 1.0).astype(np.float32),
                                best[keep][chosen].astype(np.int32), scores[keep][chosen].astype(np.float32)))
    return found
