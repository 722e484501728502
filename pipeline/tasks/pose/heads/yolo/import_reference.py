"""Parity's reference for an imported pose model: the ONNX file the user gave (RUN/original/), in onnxruntime through
the recorded input contract, its own decoded output (boxes xywh, class scores, keypoints x, y in input pixels and
visibility scores) kept as the device keeps the exported file's (edge/answers/heads/yolo.py's Settings: one class per
point, its score filter, class-agnostic NMS, the best 25)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import numpy as np

from pipeline.importing.reference import checked, input_contract, onnx_runner
from pipeline.importing.wrap import prepare
from pipeline.tasks.detect.heads.yolo.reference import kept
from pipeline.tasks.pose.poses import Poses


def poses(run_dir: Path, origin: Dict[str, Any], images, num_classes: int) -> list:
    """One Poses per uint8 image [S, S, 3], boxes and keypoints normalized to the input."""
    path = checked(run_dir, origin)
    contract = input_contract(origin)
    session = onnx_runner(path, origin)
    found = []
    for image in images:
        out = np.asarray(session(prepare(np.asarray(image, np.float32)[None], contract)), np.float32)[0].T  # [N, 4+C+3K]
        found.append(poses_of_rows(out, num_classes, *image.shape[1::-1]))
    return found


def poses_of_rows(rows: np.ndarray, num_classes: int, width: float, height: float) -> Poses:
    """Decoded rows [N, 4 + C + 3K] (xywh, C class scores, per keypoint x, y and its score; coordinates in pixels of a
    `width` x `height` input, or normalized with both 1) kept by the host decoding's rules, normalized."""
    boxes, classes, scores, at = kept(rows, num_classes, width, height)
    points = rows[at, 4 + num_classes:].reshape(len(at), (rows.shape[1] - 4 - num_classes) // 3, 3)
    xy = np.clip(points[..., :2] / np.array([width, height], np.float32), 0.0, 1.0)
    return Poses(boxes, classes, scores, np.concatenate([xy, points[..., 2:]], axis=-1).astype(np.float32))
