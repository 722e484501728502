"""YOLOv8's task-aligned assignment (TOOD's assigner) for the anchor-free head, with static shapes.

Each ground-truth box takes as positives the `topk` anchor points inside it that best align prediction and task:
score(class of the box) ** alpha * IoU(predicted box, the box) ** beta. An anchor point claimed by several boxes
keeps the one it overlaps most. Its class target is not 1 but the box's best IoU scaled by how well this point
aligns relative to the box's best-aligned point: a point whose box is poor learns a low score, so scores rank
boxes by quality, which is what NMS and mAP reward.

Assignment depends on the predictions, so it runs inside the training step (yolo_trainer.py), not on the input
side as SSD's anchor matching does; it is computed without gradient.
"""
from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

EPS = 1e-9


class Assigned(NamedTuple):
    boxes: tf.Tensor  # [B, N, 4] x1, y1, x2, y2 in input pixels: each anchor point's box (any box where not positive)
    scores: tf.Tensor  # [B, N, C] the class targets: 0, or the alignment-scaled IoU in the box's class
    positive: tf.Tensor  # [B, N] bool
    owner: tf.Tensor  # [B, N] int32: the index of each anchor point's box among the image's (any box where not positive)


def pairwise_iou(a, b):
    """IoU of x1y1x2y2 boxes a [B, M, 4] and b [B, N, 4] -> [B, M, N]."""
    a, b = a[:, :, None, :], b[:, None, :, :]
    w = tf.maximum(0.0, tf.minimum(a[..., 2], b[..., 2]) - tf.maximum(a[..., 0], b[..., 0]))
    h = tf.maximum(0.0, tf.minimum(a[..., 3], b[..., 3]) - tf.maximum(a[..., 1], b[..., 1]))
    inter = w * h
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = tf.maximum(b[..., 2] - b[..., 0], 0.0) * tf.maximum(b[..., 3] - b[..., 1], 0.0)
    return inter / (area_a + area_b - inter + EPS)


def assign(pred_scores, pred_boxes, centres, gt_boxes, gt_classes, gt_mask, topk: int = 10, alpha: float = 0.5,
           beta: float = 6.0) -> Assigned:
    """pred_scores [B, N, C] (sigmoid), pred_boxes [B, N, 4] x1y1x2y2 pixels, centres [N, 2] (x, y) pixels,
    gt_boxes [B, M, 4] x1y1x2y2 pixels, gt_classes [B, M] int, gt_mask [B, M] bool (real boxes)."""
    pred_scores, pred_boxes = tf.stop_gradient(pred_scores), tf.stop_gradient(pred_boxes)
    n = tf.shape(pred_scores)[1]
    num_classes = tf.shape(pred_scores)[2]
    real = tf.cast(gt_mask, tf.float32)[:, :, None]  # [B, M, 1]
    # Anchor points strictly inside each box.
    cx, cy = centres[None, None, :, 0], centres[None, None, :, 1]
    x1, y1, x2, y2 = (gt_boxes[..., k][:, :, None] for k in range(4))
    inside = tf.cast(tf.minimum(tf.minimum(cx - x1, cy - y1), tf.minimum(x2 - cx, y2 - cy)) > EPS, tf.float32) * real
    overlaps = pairwise_iou(gt_boxes, pred_boxes) * inside  # [B, M, N]
    class_scores = tf.gather(tf.transpose(pred_scores, [0, 2, 1]), gt_classes, batch_dims=1)  # [B, M, N]
    align = tf.pow(class_scores, alpha) * tf.pow(overlaps, beta) * inside
    # Each box's topk points by alignment (ties to the lower index), kept where inside the box.
    k = tf.minimum(topk, n)
    _, best = tf.math.top_k(align, k=k)
    chosen = tf.reduce_sum(tf.one_hot(best, n, dtype=tf.float32), axis=2)  # [B, M, N]
    candidate = chosen * inside
    # A point claimed by several boxes keeps the one it overlaps most.
    claims = tf.reduce_sum(candidate, axis=1, keepdims=True)  # [B, 1, N]
    most = tf.one_hot(tf.argmax(overlaps, axis=1), tf.shape(gt_boxes)[1], axis=1, dtype=tf.float32)  # [B, M, N]
    candidate = tf.where(claims > 1, most * inside, candidate)
    positive = tf.reduce_sum(candidate, axis=1) > 0  # [B, N]
    owner = tf.argmax(candidate, axis=1, output_type=tf.int32)  # [B, N]
    boxes = tf.gather(gt_boxes, owner, batch_dims=1)
    classes = tf.gather(gt_classes, owner, batch_dims=1)
    # Class targets: the box's best IoU among its positives, times this point's alignment over the box's best.
    align = align * candidate
    overlaps = overlaps * candidate
    best_align = tf.reduce_max(align, axis=2, keepdims=True)
    best_overlap = tf.reduce_max(overlaps, axis=2, keepdims=True)
    quality = tf.reduce_max(align * best_overlap / (best_align + EPS), axis=1)  # [B, N]
    scores = tf.one_hot(classes, num_classes) * (quality * tf.cast(positive, tf.float32))[..., None]
    return Assigned(boxes, scores, positive, owner)
