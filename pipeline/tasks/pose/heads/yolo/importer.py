"""`pipeline import --task pose` in the YOLO pose head's layout: an Ultralytics YOLO pose model (v8, 11, as
`format=onnx` writes it) with its decoding tail cut where the detector's is (pipeline/tasks/detect/heads/yolo/
onnx_tail.py, with the keypoint branch as its third per-stride convolution), converted by onnx2tf and wrapped
(import_wrap.py) so export, the pre-flight, parity and the device read it as a run trained with this head.

What the file says is read as for a detector (input, classes, Ultralytics' RGB 0..1), and its keypoint count from the
metadata's kpt_shape (Ultralytics writes [K, 3]), else the data's. Parity's reference is the ONNX file itself in
onnxruntime, its own decoded output (import_reference.py).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, Optional, Tuple

import numpy as np

from pipeline.errors import ConfigError
from pipeline.tasks.detect.heads.yolo import onnx_tail
from pipeline.tasks.detect.heads.yolo.importer import YoloImport, add_names, open_onnx
from pipeline.tasks.detect.heads.yolo.onnx_tail import BOX_CHANNELS
from pipeline.tasks.pose.heads.yolo import import_wrap
from pipeline.tasks.pose.heads.yolo.model import KEYPOINT_LIMIT

EXPECTED = ("an Ultralytics pose model as format=onnx writes it (YOLOv8-pose, 11-pose): one output (1, 4 + C + 3K, N) "
            "of decoded boxes, class scores and keypoints (x, y, visibility), kpt_shape [K, 3] in its metadata")


class YoloPoseImport(YoloImport):
    """The detector's import steps (the input contract) with the keypoint branch cut, wrapped and recorded."""

    what = "pose model"

    def read(self, fmt: str, path: Path, scratch: Path, config, sample_pixels: Callable[[], np.ndarray],
             data_keypoints: Optional[int] = None):
        model, model_input, meta = open_onnx(fmt, path, "--task pose imports an ONNX pose model (Ultralytics' "
                                                        "format=onnx: YOLOv8-pose, 11-pose)")
        k = keypoint_count(meta, path, data_keypoints)
        try:
            found = onnx_tail.find(model, str(path), extra_channels=3 * k)
        except ConfigError as err:  # the detector's refusal, naming what a pose model is expected to be
            raise ConfigError(str(err).replace(onnx_tail.EXPECTED, EXPECTED)) from None
        facts = {"cut": found.describe() + f", keypoints (1, {3 * k}, H/s, W/s)", "cut_ops": found.tail_ops,
                 "keypoints": k, "metadata": {n: meta[n] for n in ("author", "version", "task", "imgsz", "kpt_shape") if n in meta}}
        add_names(facts, meta, found.num_classes, path)
        if found.num_classes in (BOX_CHANNELS, 3 * k):
            raise ConfigError(f"{path}: {found.num_classes} classes with {k} keypoints: the class logits would have the "
                              "channels of another output, and a client tells the outputs apart by shape; expected "
                              f"another number of classes")
        return self.converted(model, model_input, found, facts, config, scratch, sample_pixels, extra_name="keypoints")

    def wrap(self, loaded, contract, folder: Path) -> None:
        import_wrap.write(loaded.saved_model, contract, folder, loaded.num_outputs, loaded.facts["keypoints"])

    def _load(self, folder: Path):
        return import_wrap.load(folder)

    def _expected(self, n: int, loaded) -> dict:
        return {**super()._expected(n, loaded), "keypoints": [1, n, 3 * loaded.facts["keypoints"]]}

    def record(self, model_entry: dict, loaded, contract) -> Tuple[dict, dict]:
        """(the manifest's `model` entry, its `pose` entry without the data's keypoint layout)."""
        model, detection = super().record(model_entry, loaded, contract)
        model["outputs"]["keypoints"] = ("[B, N, 3K] per anchor point and keypoint (dx, dy, v): the keypoint at the anchor "
                                         "point plus (dx, dy) strides, sigmoid(v) its score; " + import_wrap.BOUND)
        detection["keypoint_limit"] = KEYPOINT_LIMIT
        detection["keypoint_bound"] = import_wrap.BOUND
        return model, detection


def keypoint_count(meta: dict, path: Path, data_keypoints: Optional[int]) -> int:
    """K from the metadata's kpt_shape [K, 3] (Ultralytics writes it), else the data's; ConfigError on [K, 2] (no
    visibility, which edgeflow's layout has) or a count the data contradicts."""
    text = meta.get("kpt_shape")
    if text is None:
        if data_keypoints is None:
            raise ConfigError(f"{path}: its metadata has no kpt_shape; expected {EXPECTED}")
        return data_keypoints
    try:
        shape = [int(v) for v in ast.literal_eval(text)]
    except (ValueError, SyntaxError, TypeError):
        raise ConfigError(f"{path}: its metadata's kpt_shape {text[:40]!r} is not [K, 3]; expected {EXPECTED}") from None
    if len(shape) != 2 or shape[1] != 3 or shape[0] < 1:
        raise ConfigError(f"{path}: kpt_shape {shape}: keypoints without a visibility channel (or not [K, D]); expected "
                          "[K, 3] (x, y, visibility), as edgeflow's pose layout scores each keypoint")
    if data_keypoints is not None and shape[0] != data_keypoints:
        raise ConfigError(f"{path}: the model has {shape[0]} keypoints (kpt_shape {shape}), the data {data_keypoints}; "
                          "expected the model's keypoints in the data's layout")
    return shape[0]
