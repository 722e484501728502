"""Parity's reference for an imported pose model: the ONNX file the user gave (RUN/original/), in onnxruntime through
the recorded input contract, its own decoded output (boxes xywh, class scores, keypoints x, y in input pixels and
visibility scores) kept as the device keeps the exported file's (edge/answers/heads/yolo.py's Settings: one class per
point, its score filter, class-agnostic NMS, the best 25)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import numpy as np

from edge.answers.heads import yolo as yolo_decode
from pipeline.importing.reference import checked, input_contract, onnx_runner
from pipeline.importing.wrap import prepare
from pipeline.tasks.pose.poses import Poses


def poses(run_dir: Path, origin: Dict[str, Any], images, num_classes: int) -> list:
    """One Poses per uint8 image [S, S, 3], boxes and keypoints normalized to the input."""
    path = checked(run_dir, origin)
    contract = input_contract(origin)
    session = onnx_runner(path, origin)
    settings = yolo_decode.Settings()
    found = []
    for image in images:
        out = np.asarray(session(prepare(np.asarray(image, np.float32)[None], contract)), np.float32)[0].T  # [N, 4+C+3K]
        height, width = image.shape[:2]
        scores_all = out[:, 4:4 + num_classes]
        points = out[:, 4 + num_classes:].reshape(len(out), -1, 3)
        best = np.argmax(scores_all, axis=1)
        scores = scores_all[np.arange(len(best)), best]
        keep = np.flatnonzero(scores >= settings.score_threshold)
        cx, cy, w, h = (out[keep, k] for k in range(4))
        corners = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1).astype(np.float32)
        chosen = yolo_decode.nms(corners, scores[keep], settings.iou_threshold, settings.max_detections)
        at = keep[chosen]
        xyxy = corners[chosen] / np.array([width, height, width, height], np.float32)
        xy = points[at][..., :2] / np.array([width, height], np.float32)
        kept = np.concatenate([np.clip(xy, 0.0, 1.0), points[at][..., 2:]], axis=-1).astype(np.float32)
        found.append(Poses(np.clip(xyxy[:, [1, 0, 3, 2]], 0.0, 1.0).astype(np.float32), best[at].astype(np.int32),
                           scores[at].astype(np.float32), kept))
    return found
