"""edge/clients/frigate.py, Frigate's yolo-generic reading reproduced: its NMS equal to OpenCV's own cv2.dnn.NMSBoxes
where OpenCV is importable, and, on quantized outputs of several objects, the same objects as `edge detect`'s decode
(same class, IoU >= 0.9)."""
from __future__ import annotations

import numpy as np
import pytest

from edge.clients import frigate as frigate_yolo
from edge.answers.heads import yolo as yolo_decode
from edge.answers.detect import get_raw, kept, output_indices

SIZE = 96  # 144 + 36 + 9 anchor points
DIST_Q = (0.2, -10)  # the box distributions' (scale, zero point)
LOGITS_Q = (1 / 32, 0)  # the class logits', as edgeflow's export pins them


def test_nms_is_opencvs():
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed here (edge/ does not depend on it)")
    rng = np.random.default_rng(0)
    for case in range(300):
        n = int(rng.integers(1, 50))
        xy, wh = rng.uniform(0, 300, (n, 2)), rng.uniform(1, 80, (n, 2))
        if case % 3 == 0:  # on a grid: equal overlaps and areas, where rounding decides
            xy, wh = np.round(xy / 8) * 8, np.round(wh / 8) * 8 + 8
        rects = np.concatenate([xy, xy + wh if case % 2 else wh], axis=1).astype(np.float32)
        scores = rng.uniform(0, 5, n)
        if case % 4 == 0:
            scores = np.round(scores * 2) / 2  # ties
        threshold, iou = float(rng.uniform(0, 3)), float(rng.choice([0.3, 0.4, 0.5, 0.7]))
        want = np.array(cv2.dnn.NMSBoxes(bboxes=rects, scores=scores, score_threshold=threshold, nms_threshold=iou),
                        np.int64).ravel()
        np.testing.assert_array_equal(frigate_yolo.nms_boxes(rects, scores, threshold, iou), want, err_msg=f"case {case}")


def _objects(rng):
    """Quantized outputs for four objects, each seen by several anchor points with jittered boxes and scores."""
    centres, strides = yolo_decode.anchor_points(SIZE, SIZE)
    n = len(centres)
    dist = np.zeros((n, 4, 16), np.float32)
    dist[:, :, 0] = 6.0  # background points: boxes of nothing
    logits = np.full((n, 3), -4.0, np.float32)
    truth = [(0, (8, 10, 40, 44)), (1, (50, 12, 90, 40)), (2, (20, 55, 60, 92)), (0, (66, 60, 84, 80))]
    for cls, (x1, y1, x2, y2) in truth:
        inside = np.flatnonzero((centres[:, 0] > x1 + 4) & (centres[:, 0] < x2 - 4) & (centres[:, 1] > y1 + 4)
                                & (centres[:, 1] < y2 - 4) & (strides[:, 0] <= 16))
        for i in inside:
            cx, cy = centres[i]
            s = strides[i, 0]
            for side, d in enumerate(((cx - x1) / s, (cy - y1) / s, (x2 - cx) / s, (y2 - cy) / s)):
                d = min(max(d + rng.normal(0, 0.05), 0.0), 14.99)
                low = int(d)
                dist[i, side] = -4.0
                dist[i, side, low], dist[i, side, low + 1] = 4.0 + np.log(low + 1 - d + 1e-3), 4.0 + np.log(d - low + 1e-3)
            logits[i, cls] = rng.uniform(0.0, 3.5)
    q_dist = np.clip(np.round(dist.reshape(n, 64) / DIST_Q[0]) + DIST_Q[1], -128, 127).astype(np.int8)
    q_logits = np.clip(np.round(logits / LOGITS_Q[0]) + LOGITS_Q[1], -128, 127).astype(np.int8)
    return q_dist, q_logits, truth


class _Interpreter:
    def __init__(self, q_dist, q_logits):
        self.tensors = {3: q_dist[None], 5: q_logits[None]}

    def get_output_details(self):
        return [{"index": 5, "shape": np.array([1, len(self.tensors[5][0]), 3]), "quantization": LOGITS_Q},
                {"index": 3, "shape": np.array([1, len(self.tensors[3][0]), 64]), "quantization": DIST_Q}]

    def get_input_details(self):
        return [{"index": 0, "shape": np.array([1, SIZE, SIZE, 3]), "dtype": np.uint8}]

    def get_tensor(self, index):
        return self.tensors[index]


def _iou(a, b) -> float:
    h = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    w = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - h * w
    return h * w / union


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frigate_finds_what_edge_detect_finds(seed):
    interpreter = _Interpreter(*_objects(np.random.default_rng(seed))[:2])
    frigate = frigate_yolo.FrigateYolo(interpreter)
    assert frigate.min_quantized == int(np.log(0.4 / 0.6) * 32)  # logit(0.4) on the grid, truncated as int() does
    boxes, classes, scores = frigate_yolo.objects(frigate.read(interpreter))
    ours = kept(get_raw(interpreter, output_indices(interpreter)), 0.4)
    assert 3 <= len(boxes) <= frigate_yolo.MAX_DETECTIONS
    assert len(ours.ids) == len(classes)
    for box, c in zip(boxes, classes):
        assert any(c == c2 and _iou(box, b2) >= 0.9 for b2, c2 in zip(ours.boxes, ours.ids)), (box, c)
    for box, c in zip(ours.boxes, ours.ids):
        assert any(c == c2 and _iou(box, b2) >= 0.9 for b2, c2 in zip(boxes, classes)), (box, c)
    assert scores.min() >= 0.4


def test_float_class_logits_are_refused_as_frigate_would_fail():
    q_dist, q_logits, _ = _objects(np.random.default_rng(0))
    interpreter = _Interpreter(q_dist, q_logits)
    interpreter.get_output_details = lambda: [{"index": 5, "shape": np.array([1, 189, 3]), "quantization": (0.0, 0)},
                                              {"index": 3, "shape": np.array([1, 189, 64]), "quantization": DIST_Q}]
    with pytest.raises(Exception, match="float"):
        frigate_yolo.FrigateYolo(interpreter)
