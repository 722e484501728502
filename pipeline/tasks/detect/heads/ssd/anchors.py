"""SSD anchors, the center-size box coder TFLite's detection post-processing uses, and target assignment.

Anchors are normalized (ycenter, xcenter, height, width) rows, level by level, and within a level
row-major over the grid with the anchor shapes innermost: the order a convolutional head's
[B, H, W, K*4] output has after a reshape to [B, H*W*K, 4].
"""
from __future__ import annotations

from typing import NamedTuple, Sequence, Tuple

import numpy as np
import tensorflow as tf

# TFLite_Detection_PostProcess's y_scale, x_scale, h_scale, w_scale (the TF Object Detection API's defaults).
SCALE_FACTORS = (10.0, 10.0, 5.0, 5.0)


class AnchorSpec(NamedTuple):
    strides: Tuple[int, ...] = (8, 16)  # one feature level per stride
    base_sizes: Tuple[float, ...] = (0.15, 0.34)  # anchor side per level, as a share of the input side
    scales: Tuple[float, ...] = (1.0, 1.5)  # multiples of a level's base size
    aspect_ratios: Tuple[float, ...] = (1.0, 2.0, 0.5)  # width / height

    @property
    def per_location(self) -> int:
        return len(self.scales) * len(self.aspect_ratios)


def anchors(image_size: int, spec: AnchorSpec = AnchorSpec()) -> np.ndarray:
    """float32 [A, 4] (ycenter, xcenter, height, width), normalized."""
    rows = []
    for stride, base in zip(spec.strides, spec.base_sizes):
        grid = image_size // stride
        centers = (np.arange(grid, dtype=np.float64) + 0.5) / grid
        shapes = [(base * s / np.sqrt(r), base * s * np.sqrt(r)) for s in spec.scales for r in spec.aspect_ratios]
        for cy in centers:
            for cx in centers:
                rows.extend((cy, cx, h, w) for h, w in shapes)
    return np.asarray(rows, np.float32)


def corners(center_size):
    """(ycenter, xcenter, h, w) -> (ymin, xmin, ymax, xmax); numpy or tf."""
    cy, cx, h, w = (center_size[..., k] for k in range(4))
    return _stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], center_size)


def encode(boxes, anchor_boxes):
    """Corner boxes [.., A, 4] -> the coder's targets (ty, tx, th, tw) against `anchor_boxes` [A, 4]."""
    ya, xa, ha, wa = (anchor_boxes[..., k] for k in range(4))
    ymin, xmin, ymax, xmax = (boxes[..., k] for k in range(4))
    h, w = ymax - ymin, xmax - xmin
    log = tf.math.log if isinstance(boxes, tf.Tensor) else np.log
    sy, sx, sh, sw = SCALE_FACTORS
    return _stack([((ymin + ymax) / 2 - ya) / ha * sy, ((xmin + xmax) / 2 - xa) / wa * sx,
                   log(h / ha) * sh, log(w / wa) * sw], boxes)


def decode(codes, anchor_boxes):
    """The coder's (ty, tx, th, tw) [.., A, 4] -> corner boxes, as the post-processing op decodes them."""
    ya, xa, ha, wa = (anchor_boxes[..., k] for k in range(4))
    sy, sx, sh, sw = SCALE_FACTORS
    exp = tf.exp if isinstance(codes, tf.Tensor) else np.exp
    cy = codes[..., 0] / sy * ha + ya
    cx = codes[..., 1] / sx * wa + xa
    h = exp(codes[..., 2] / sh) * ha
    w = exp(codes[..., 3] / sw) * wa
    return _stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], codes)


def iou(a, b):
    """IoU of corner boxes a [N, 4] and b [M, 4] -> [N, M] (tf)."""
    a, b = a[:, None, :], b[None, :, :]
    ih = tf.maximum(0.0, tf.minimum(a[..., 2], b[..., 2]) - tf.maximum(a[..., 0], b[..., 0]))
    iw = tf.maximum(0.0, tf.minimum(a[..., 3], b[..., 3]) - tf.maximum(a[..., 1], b[..., 1]))
    inter = ih * iw
    area = lambda r: (r[..., 2] - r[..., 0]) * (r[..., 3] - r[..., 1])  # noqa: E731
    return inter / tf.maximum(area(a) + area(b) - inter, 1e-9)


def assign(anchor_boxes, boxes, classes, mask, positive: float = 0.5, negative: float = 0.4):
    """Targets for one image with static shapes: boxes [M, 4] corners, classes [M], mask [M] (real boxes).

    Returns (box_targets [A, 4], class_targets [A] int32: 0 background, c + 1 an object of class c,
    -1 ignored). An anchor is positive at IoU >= `positive` with a box, and every box's best anchor is
    positive too, so small boxes are never left without one.
    """
    overlaps = iou(corners(anchor_boxes), boxes)
    overlaps = tf.where(mask[None, :], overlaps, -1.0)
    best_box = tf.argmax(overlaps, axis=1, output_type=tf.int32)
    best_iou = tf.reduce_max(overlaps, axis=1)
    # Each real box claims its best anchor (ties to the first), overriding the threshold.
    best_anchor = tf.argmax(overlaps, axis=0, output_type=tf.int32)
    # Max, not scatter_nd's sum: two boxes with the same best anchor must not add their numbers.
    forced = tf.tensor_scatter_nd_max(tf.zeros([tf.shape(anchor_boxes)[0]], tf.int32), best_anchor[:, None],
                                      tf.where(mask, tf.range(tf.shape(boxes)[0]) + 1, 0))
    forced_box = forced - 1
    is_forced = forced > 0
    matched_box = tf.where(is_forced, forced_box, best_box)
    matched_cls = tf.gather(classes, matched_box) + 1
    targets = tf.where(is_forced | (best_iou >= positive), matched_cls,
                       tf.where(best_iou < negative, 0, -1))
    box_targets = encode(tf.gather(boxes, matched_box), anchor_boxes)
    box_targets = tf.where((targets > 0)[:, None], box_targets, 0.0)
    return box_targets, tf.cast(targets, tf.int32)


def _stack(parts: Sequence, like):
    if isinstance(like, tf.Tensor):
        return tf.stack(parts, axis=-1)
    return np.stack(parts, axis=-1).astype(np.float32)
