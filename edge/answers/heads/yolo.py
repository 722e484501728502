"""Host decoding of an anchor-free (YOLOv8-family) detector's two outputs, numpy only: what the SSD models' post-processing
op does inside the model, done after the invoke, as Frigate's `yolo-generic` reader does.

    layout = find_layout(interpreter)            # None unless the outputs are (1, N, 64) and (1, N, C)
    boxes, classes, scores = read(interpreter, layout)

The outputs: box distributions (1, N, 64), 4 sides (left, top, right, bottom) x 16 bins, and class logits (1, N, C),
N the anchor points of strides 8, 16 and 32 at cell centres, level by level and row-major. Decoding: the best class
per point (one class per box, as the op's fast NMS keeps), a score filter on its logit, a softmax over each side's
bins, the expected distance times the stride, boxes from the anchor centre, class-agnostic greedy NMS, the best
`max_detections`. The SSD export's op's defaults (25 detections, IoU 0.6; the score cut is 0.05, see Settings), so a
stage reading either head's model gets the same kind of answer.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from edge.answers.heads.raw import Raw

STRIDES = (8, 16, 32)
REG_MAX = 16
BOX_CHANNELS = 4 * REG_MAX


class Settings(NamedTuple):
    max_detections: int = 25
    # Not the op's 0.01: the head bounds its logits to (-4, 4), so every background point scores at least
    # sigmoid(-4) = 0.018 and a 0.01 cut would keep all 2,100 candidates; 0.05 is COCO evaluation's usual floor.
    score_threshold: float = 0.05
    iou_threshold: float = 0.6


class Layout(NamedTuple):
    """Where an anchor-free detector's outputs are and how to read them."""

    boxes: int  # tensor index of the (1, N, 64) box distributions
    logits: int  # tensor index of the (1, N, C) class logits
    boxes_q: Tuple[float, int]  # (scale, zero point); scale 0 for a float output
    logits_q: Tuple[float, int]
    height: int  # the input's size, which the boxes are normalized by
    width: int
    centres: np.ndarray  # [N, 2] anchor points (x, y) in input pixels
    strides: np.ndarray  # [N, 1]

    def read(self, interpreter: Any) -> Tuple[np.ndarray, np.ndarray]:
        """Right after an invoke, the two tensors as stored (get_tensor copies), which `raw` decodes later (a worker
        can: the decode and NMS in numpy need no interpreter)."""
        return interpreter.get_tensor(self.boxes)[0], interpreter.get_tensor(self.logits)[0]

    def raw(self, outputs: Tuple[np.ndarray, np.ndarray]) -> Raw:
        """What `read` read, decoded on the host into the op's kind of answer."""
        boxes, classes, scores = decode(outputs[0], outputs[1], self)
        return Raw(boxes, classes.astype(np.float32), scores, len(scores))


def anchor_points(height: int, width: int, strides: Sequence[int] = STRIDES) -> Tuple[np.ndarray, np.ndarray]:
    """(centres [N, 2] as (x, y) in input pixels, strides [N, 1]): cell centres, level by level, row-major."""
    centres, steps = [], []
    for s in strides:
        ys, xs = np.meshgrid(np.arange(height // s, dtype=np.float32), np.arange(width // s, dtype=np.float32), indexing="ij")
        centres.append((np.stack([xs.ravel(), ys.ravel()], axis=1) + 0.5) * s)
        steps.append(np.full((xs.size, 1), s, np.float32))
    return np.concatenate(centres), np.concatenate(steps)


def find_layout(interpreter: Any) -> Optional[Layout]:
    """The layout of an interpreter's model, or None when its outputs are not the anchor-free head's two: told apart by
    shape, the box distributions being the one with 64 channels (the first output when both have 64)."""
    details = interpreter.get_output_details()
    if len(details) != 2:
        return None
    shapes = [[int(x) for x in d["shape"]] for d in details]
    if any(len(s) != 3 or s[0] != 1 for s in shapes) or shapes[0][1] != shapes[1][1]:
        return None
    first = 0 if shapes[0][2] == BOX_CHANNELS else 1 if shapes[1][2] == BOX_CHANNELS else None
    if first is None:
        return None
    box, cls = details[first], details[1 - first]
    shape = [int(x) for x in interpreter.get_input_details()[0]["shape"]]
    if len(shape) != 4:
        return None
    height, width = shape[1], shape[2]
    centres, strides = anchor_points(height, width)
    if len(centres) != shapes[0][1]:
        return None
    return Layout(int(box["index"]), int(cls["index"]), _quantization(box), _quantization(cls), height, width, centres, strides)


def _quantization(detail) -> Tuple[float, int]:
    scale, zero = detail.get("quantization", (0.0, 0))
    return float(scale), int(zero)


def dequantized(values: np.ndarray, quantization: Tuple[float, int]) -> np.ndarray:
    scale, zero = quantization
    if not scale:
        return np.asarray(values, np.float32)
    return (values.astype(np.float32) - zero) * np.float32(scale)


def read(interpreter: Any, layout: Layout, settings: Settings = Settings()) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(boxes [K, 4] ymin, xmin, ymax, xmax normalized to the input, class ids [K], scores [K]) after an invoke,
    highest score first."""
    dist = interpreter.get_tensor(layout.boxes)[0]
    logits = interpreter.get_tensor(layout.logits)[0]
    return decode(dist, logits, layout, settings)


def decode(dist: np.ndarray, logits: np.ndarray, layout: Layout, settings: Settings = Settings()):
    """`read` on the two outputs of one image ([N, 64] and [N, C], as stored: quantized or float)."""
    return select(dist, logits, layout, settings)[1:]


def select(dist: np.ndarray, logits: np.ndarray, layout: Layout, settings: Settings = Settings()):
    """`decode`'s answers after the anchor points they came from: (points [K], boxes, class ids, scores); a head with
    more outputs per point reads them at those points."""
    best = np.argmax(logits, axis=1)
    top = dequantized(logits[np.arange(len(best)), best], layout.logits_q)
    # The filter on logits: sigmoid is monotonic, so only the survivors' scores are computed.
    threshold = _logit(settings.score_threshold)
    keep = np.flatnonzero(top >= threshold)
    if not keep.size:
        return np.zeros(0, np.int64), np.zeros((0, 4), np.float32), np.zeros(0, np.int64), np.zeros(0, np.float32)
    scores = 1.0 / (1.0 + np.exp(-top[keep]))
    corners = boxes_of(dequantized(dist[keep], layout.boxes_q), layout.centres[keep], layout.strides[keep])
    chosen = nms(corners, scores, settings.iou_threshold, settings.max_detections)
    size = np.array([layout.width, layout.height, layout.width, layout.height], np.float32)
    xyxy = corners[chosen] / size
    return (keep[chosen].astype(np.int64), xyxy[:, [1, 0, 3, 2]].astype(np.float32), best[keep][chosen].astype(np.int64),
            scores[chosen].astype(np.float32))


def boxes_of(dist: np.ndarray, centres: np.ndarray, strides: np.ndarray) -> np.ndarray:
    """x1, y1, x2, y2 in input pixels [K, 4] from the distributions [K, 64]: softmax per side, expected bin x stride."""
    bins = dist.reshape(-1, 4, REG_MAX)
    bins = np.exp(bins - bins.max(axis=2, keepdims=True))
    distance = (bins / bins.sum(axis=2, keepdims=True)) @ np.arange(REG_MAX, dtype=np.float32)  # [K, 4]
    distance = distance * strides
    return np.concatenate([centres - distance[:, :2], centres + distance[:, 2:]], axis=1).astype(np.float32)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, max_out: int) -> np.ndarray:
    """Greedy class-agnostic NMS on x1y1x2y2 boxes: indices kept, highest score first (ties: the earlier box)."""
    order = np.argsort(-scores, kind="stable")
    area = np.maximum(boxes[:, 2] - boxes[:, 0], 0) * np.maximum(boxes[:, 3] - boxes[:, 1], 0)
    kept = []
    while order.size and len(kept) < max_out:
        i = order[0]
        kept.append(i)
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(boxes[i, 2], boxes[rest, 2]) - np.maximum(boxes[i, 0], boxes[rest, 0]))
        h = np.maximum(0.0, np.minimum(boxes[i, 3], boxes[rest, 3]) - np.maximum(boxes[i, 1], boxes[rest, 1]))
        inter = w * h
        union = area[i] + area[rest] - inter
        iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
        order = rest[iou <= iou_threshold]
    return np.asarray(kept, np.int64)


def _logit(p: float) -> float:
    if p <= 0:
        return -np.inf
    if p >= 1:
        return np.inf
    return float(np.log(p / (1 - p)))
