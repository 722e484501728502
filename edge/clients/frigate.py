"""Frigate's Edge TPU plugin reading a `yolo-generic` model, reproduced step by step in numpy (Frigate 0.17,
frigate/detectors/plugins/edgetpu_tfl.py, EdgeTpuTfl.__init__ and detect_raw), so parity can score the int8 file as
Frigate's users get it and a test can hold the reproduction to OpenCV's own NMS.

At start-up: the output whose last dimension is 64 is the box distributions, another 3-D one with more than one
column the class logits; anchors are cell centres (x, y) of strides 8, 16, 32 over the model's width and height; the
score threshold 0.4 becomes the logit log(0.4 / 0.6) and that logit is quantized onto the class output's grid,
truncated to an integer (Python's int()); a shift making every logit positive is ceil((128 + zero point) x scale) + 1.

Per frame: the max quantized logit per anchor, kept where >= the quantized threshold; the kept logits dequantized and
shifted; the kept box distributions dequantized, softmaxed per side over 16 bins, the expected bin times the stride,
corners (anchor - left/top, anchor + right/bottom) x stride, in pixels; cv2.dnn.NMSBoxes on them (IoU 0.4, the
shifted threshold); at most 20; the class the argmax of the kept quantized logits; the score the sigmoid of the
unshifted logit; rows (class, score, ymin, xmin, ymax, xmax) normalized by the model's height and width.

Two things Frigate does that a reader should know, both reproduced: NMSBoxes takes (x, y, width, height) rectangles,
and Frigate hands it (x1, y1, x2, y2), so the overlaps it suppresses by are those of the rectangles
(x1, y1) to (x1 + x2, y1 + y2); and the dequantization subtracts the zero point from int8 values in int8 arithmetic,
which wraps unless the zero point is 0 (edgeflow's export pins it to 0).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import numpy as np

from edge.errors import InputError

MIN_SCORE = 0.4  # EdgeTpuTfl.min_score
MAX_DETECTIONS = 20  # EdgeTpuTfl.max_detections
NMS_IOU = 0.4  # the nms_threshold detect_raw passes
REG_MAX = 16
STRIDES = (8, 16, 32)


class FrigateYolo:
    """What the plugin's __init__ works out for a yolo-generic model on `interpreter` (model width and height: the
    input's, as a Frigate configuration for the file gives them). `min_score`: Frigate's 0.4; parity lowers it to
    score every detection the reading would keep, as the SSD clients' rows are scored (its agreement still counts
    the detections >= 0.4)."""

    def __init__(self, interpreter: Any, width: int = 0, height: int = 0, min_score: float = MIN_SCORE):
        details = interpreter.get_output_details()
        if len(details) not in (2, 3):
            raise InputError(f"the model has {len(details)} outputs; Frigate's yolo-generic reading takes 2 or 3")
        shape = interpreter.get_input_details()[0]["shape"]
        self.height, self.width = int(height or shape[1]), int(width or shape[2])
        boxes_at = classes_at = None
        for i, d in enumerate(details):  # by shape; a 64-class model would be taken wrongly, as Frigate takes it
            if len(d["shape"]) == 3 and d["shape"][2] == 64:
                boxes_at = i
            elif len(d["shape"]) == 3 and d["shape"][2] > 1:
                classes_at = i
        if boxes_at is None or classes_at is None:  # Frigate's fallback guess
            classes_at = 0 if (boxes_at is None or classes_at == 1) else 1
            boxes_at = 1 if boxes_at == 0 else 0
        self.scores_index = int(details[classes_at]["index"])
        self.scores_scale, self.scores_zero_point = details[classes_at]["quantization"]
        self.boxes_index = int(details[boxes_at]["index"])
        self.boxes_scale, self.boxes_zero_point = details[boxes_at]["quantization"]
        if not self.scores_scale:
            raise InputError("the class logits are float; Frigate's yolo-generic reading divides by their quantization scale")
        self.min_score = min_score
        self.min_logit = math.log(min_score / (1 - min_score))
        self.min_quantized = int(self.min_logit / self.scores_scale + self.scores_zero_point)
        self.shift = max(0, math.ceil((128 + self.scores_zero_point) * self.scores_scale)) + 1
        anchors, strides = [], []
        for s in STRIDES:
            gy, gx = np.meshgrid(np.arange(self.height // s, dtype=np.float32), np.arange(self.width // s, dtype=np.float32),
                                 indexing="ij")
            anchors.append(np.stack((gx.flatten(), gy.flatten()), axis=1) + 0.5)
            strides.append(np.full((gx.size, 1), s, dtype=np.float32))
        self.anchors = np.concatenate(anchors, axis=0)
        self.strides = np.concatenate(strides, axis=0)
        self.bins = np.arange(REG_MAX, dtype=np.float32)

    def read(self, interpreter: Any) -> np.ndarray:
        """The plugin's detect_raw after the invoke: float32 [20, 6] rows (class, score, ymin, xmin, ymax, xmax)."""
        rows = np.zeros((MAX_DETECTIONS, 6), np.float32)
        logits_q = interpreter.get_tensor(self.scores_index)[0]
        top_q = np.max(logits_q, axis=1)
        mask = top_q >= self.min_quantized
        if not np.any(mask):
            return rows
        top = ((top_q[mask] - self.scores_zero_point) * self.scores_scale) + self.shift  # int8 arithmetic first, as Frigate's
        kept_logits_q = logits_q[mask]
        dist = (interpreter.get_tensor(self.boxes_index)[0][mask].astype(np.float32) - self.boxes_zero_point) * self.boxes_scale
        dist = dist.reshape(-1, 4, REG_MAX)
        e = np.exp(dist - np.max(dist, axis=2, keepdims=True))
        probs = e / np.sum(e, axis=2, keepdims=True)
        distances = np.einsum("pcr,r->pc", probs, self.bins)
        anchors, strides = self.anchors[mask], self.strides[mask]
        corners = np.concatenate(((anchors - distances[:, [0, 1]]) * strides, (anchors + distances[:, [2, 3]]) * strides), axis=-1)
        chosen = nms_boxes(corners, top, self.min_logit + self.shift, NMS_IOU)
        if not len(chosen):
            return rows
        chosen = chosen[:MAX_DETECTIONS]
        k = len(chosen)
        rows[:k, 0] = np.argmax(kept_logits_q[chosen], axis=1)
        rows[:k, 1] = 1.0 / (1.0 + np.exp(-(top[chosen] - self.shift)))
        boxes = corners[chosen]
        rows[:k, 2] = boxes[:, 1] / self.height
        rows[:k, 3] = boxes[:, 0] / self.width
        rows[:k, 4] = boxes[:, 3] / self.height
        rows[:k, 5] = boxes[:, 2] / self.width
        return rows


def nms_boxes(rects: np.ndarray, scores: np.ndarray, score_threshold: float, nms_threshold: float) -> np.ndarray:
    """cv2.dnn.NMSBoxes on Rect2d rows (x, y, width, height), its defaults eta 1 and top_k 0: the indices kept, best
    first. Scores and threshold are float32 (OpenCV takes a vector of float); candidates score strictly above the
    threshold, sorted best first keeping the input order among equals; a candidate is kept when its overlap with
    every one kept so far is at most `nms_threshold`; overlap is 1 less the Jaccard distance (in double) of the rectangles,
    as a float (0 distance when both areas are 0)."""
    scores = np.asarray(scores, np.float32)
    rects = np.asarray(rects, np.float64).reshape(-1, 4)
    candidates = np.flatnonzero(scores > np.float32(score_threshold))
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    kept = []
    x1, y1 = rects[:, 0], rects[:, 1]
    x2, y2 = x1 + rects[:, 2], y1 + rects[:, 3]
    area = rects[:, 2] * rects[:, 3]
    limit = np.float32(nms_threshold)
    for i in order:
        keep = True
        for j in kept:
            w = min(x2[i], x2[j]) - max(x1[i], x1[j])
            h = min(y2[i], y2[j]) - max(y1[i], y1[j])
            inter = w * h if w > 0 and h > 0 else 0.0
            both = area[i] + area[j]
            distance = 0.0 if both <= np.finfo(np.float64).eps else 1.0 - inter / (both - inter)  # Jaccard, in double
            if np.float32(1.0) - np.float32(distance) > limit:  # OpenCV's rectOverlap is a float
                keep = False
                break
        if keep:
            kept.append(i)
    return np.asarray(kept, np.int64)


def objects(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(boxes [K, 4] ymin, xmin, ymax, xmax normalized, class ids [K], scores [K]) of the rows Frigate filled."""
    used = rows[:, 1] > 0
    return rows[used, 2:6], rows[used, 0].astype(np.int64), rows[used, 1]


def describe(reader: FrigateYolo) -> Dict[str, Any]:
    return {"min_score": reader.min_score, "min_logit_quantized": reader.min_quantized, "nms_iou": NMS_IOU,
            "max_detections": MAX_DETECTIONS, "model_size": [reader.width, reader.height]}
