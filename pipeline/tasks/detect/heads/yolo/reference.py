"""Parity's reference for an imported detector: the ONNX file the user gave (RUN/original/), in onnxruntime through the
recorded input contract (pipeline/importing/reference.py), its own decoded output read by the host decoding's rules."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import numpy as np

from edge.answers.heads import yolo as yolo_decode
from pipeline.importing.reference import checked, input_contract, onnx_runner
from pipeline.importing.wrap import prepare
from pipeline.tasks.detect.evaluate import Detections


def detections(run_dir: Path, origin: Dict[str, Any], images) -> list:
    """An imported detector's own answers on uint8 pixels [S, S, 3]: the original ONNX file in onnxruntime, its decoded
    output (1, 4 + C, N) (xywh in input pixels, class scores) through the host decoding's rules (one class per box,
    its score filter, class-agnostic NMS, the best 25: edge/answers/heads/yolo.py's Settings), as the detect task's
    Detections with boxes normalized to the input."""
    path = checked(run_dir, origin)
    contract = input_contract(origin)
    session = onnx_runner(path, origin)
    found = []
    for image in images:
        out = np.asarray(session(prepare(np.asarray(image, np.float32)[None], contract)), np.float32)[0].T  # [N, 4 + C]
        boxes, classes, scores, _ = kept(out, out.shape[1] - 4, *image.shape[1::-1])
        found.append(Detections(boxes, classes, scores))
    return found


def kept(rows: np.ndarray, num_classes: int, width: float, height: float):
    """Decoded rows [N, 4 + C + ...] (xywh in pixels of a `width` x `height` input, then C class scores) kept by the host
    decoding's rules: (boxes [n, 4] ymin, xmin, ymax, xmax normalized and clipped, classes [n], scores [n], the kept
    rows' indices [n]), best first."""
    settings = yolo_decode.Settings()
    scores_all = rows[:, 4:4 + num_classes]
    best = np.argmax(scores_all, axis=1)
    scores = scores_all[np.arange(len(best)), best]
    keep = np.flatnonzero(scores >= settings.score_threshold)
    cx, cy, w, h = (rows[keep, k] for k in range(4))
    corners = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1).astype(np.float32)
    chosen = yolo_decode.nms(corners, scores[keep], settings.iou_threshold, settings.max_detections)
    xyxy = corners[chosen] / np.array([width, height, width, height], np.float32)
    at = keep[chosen]
    return (np.clip(xyxy[:, [1, 0, 3, 2]], 0.0, 1.0).astype(np.float32), best[at].astype(np.int32),
            scores[at].astype(np.float32), at)
