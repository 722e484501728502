"""The anchor-free head's training loss, YOLOv8's: binary cross-entropy on the class logits against the task-aligned
targets (yolo_assign.py), CIoU on the decoded boxes and distribution focal loss (DFL) on the 16-bin side
distributions of positive anchor points, weighted 0.5, 7.5 and 1.5 and divided by the sum of the class targets.

CIoU (IoU less the centre distance over the enclosing box's diagonal, less an aspect-ratio term) is YOLOv8's
choice over GIoU: for boxes that overlap, its gradient also moves the centre and the aspect ratio, which GIoU's
enclosing-area term does not once one box holds the other.
"""
from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.yolo.assign import EPS, assign

WEIGHTS = {"box": 7.5, "class": 0.5, "dfl": 1.5}  # YOLOv8's box, cls and dfl gains


def decode_distances(box_dist, reg_max: int):
    """[B, N, 4 * reg_max] logits -> [B, N, 4] expected distances (left, top, right, bottom) in strides."""
    shape = tf.shape(box_dist)
    probs = tf.nn.softmax(tf.reshape(box_dist, [shape[0], shape[1], 4, reg_max]), axis=-1)
    return tf.reduce_sum(probs * tf.range(reg_max, dtype=box_dist.dtype), axis=-1)


def decode_boxes(box_dist, centres, strides, reg_max: int):
    """x1, y1, x2, y2 in input pixels [B, N, 4] from the distributions, anchor centres [N, 2] and strides [N]."""
    d = decode_distances(box_dist, reg_max) * strides[None, :, None]
    return tf.concat([centres[None] - d[..., :2], centres[None] + d[..., 2:]], axis=-1)


def ciou(a, b):
    """Complete IoU of matching x1y1x2y2 boxes [..., 4] -> [...]."""
    wa, ha = a[..., 2] - a[..., 0], a[..., 3] - a[..., 1]
    wb, hb = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    inter = (tf.maximum(0.0, tf.minimum(a[..., 2], b[..., 2]) - tf.maximum(a[..., 0], b[..., 0]))
             * tf.maximum(0.0, tf.minimum(a[..., 3], b[..., 3]) - tf.maximum(a[..., 1], b[..., 1])))
    union = wa * ha + wb * hb - inter + EPS
    iou = inter / union
    cw = tf.maximum(a[..., 2], b[..., 2]) - tf.minimum(a[..., 0], b[..., 0])
    ch = tf.maximum(a[..., 3], b[..., 3]) - tf.minimum(a[..., 1], b[..., 1])
    diagonal = cw ** 2 + ch ** 2 + EPS
    centres = ((a[..., 0] + a[..., 2] - b[..., 0] - b[..., 2]) ** 2 + (a[..., 1] + a[..., 3] - b[..., 1] - b[..., 3]) ** 2) / 4
    v = (4 / math.pi ** 2) * (tf.atan(wb / (hb + EPS)) - tf.atan(wa / (ha + EPS))) ** 2
    alpha = tf.stop_gradient(v / (v - iou + (1 + EPS)))
    return iou - (centres / diagonal + v * alpha)


def giou(a, b):
    """Generalized IoU of matching x1y1x2y2 boxes [..., 4] -> [...]: IoU less the enclosing box's share not in the union
    (bench/detect/yolo/box_loss.py compares it with CIoU)."""
    inter = (tf.maximum(0.0, tf.minimum(a[..., 2], b[..., 2]) - tf.maximum(a[..., 0], b[..., 0]))
             * tf.maximum(0.0, tf.minimum(a[..., 3], b[..., 3]) - tf.maximum(a[..., 1], b[..., 1])))
    union = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1]) + (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1]) - inter + EPS
    hull = ((tf.maximum(a[..., 2], b[..., 2]) - tf.minimum(a[..., 0], b[..., 0]))
            * (tf.maximum(a[..., 3], b[..., 3]) - tf.minimum(a[..., 1], b[..., 1])) + EPS)
    return inter / union - (hull - union) / hull


BOX_IOU = {"ciou": ciou, "giou": giou}


def dfl(box_dist, target_distances, reg_max: int):
    """Distribution focal loss per anchor point [B, N]: cross-entropy towards the two bins around each side's
    target distance, weighted by nearness, averaged over the four sides."""
    shape = tf.shape(box_dist)
    logits = tf.reshape(box_dist, [shape[0], shape[1], 4, reg_max])
    target = tf.clip_by_value(target_distances, 0.0, reg_max - 1 - 0.01)
    left = tf.floor(target)
    weight_left = left + 1 - target
    left = tf.cast(left, tf.int32)
    ce_left = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=left, logits=logits)
    ce_right = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=left + 1, logits=logits)
    return tf.reduce_mean(ce_left * weight_left + ce_right * (1 - weight_left), axis=-1)


def yolo_loss(box_dist, class_logits, gt_boxes, gt_classes, gt_mask, centres: np.ndarray, strides: np.ndarray,
              image_size: int, reg_max: int, summed=None, box_iou: str = "ciou"):
    """(total, class loss, box loss, dfl loss) for one batch. gt_boxes [B, M, 4] normalized (ymin, xmin, ymax, xmax),
    as the detection input pipeline pads them. The losses are divided by the sum of the class targets, at least 1;
    `summed` turns this batch's sum into the one to use (training across replicas passes the global batch's)."""
    return yolo_loss_assigned(box_dist, class_logits, gt_boxes, gt_classes, gt_mask, centres, strides, image_size,
                              reg_max, summed, box_iou)[0]


def yolo_loss_assigned(box_dist, class_logits, gt_boxes, gt_classes, gt_mask, centres: np.ndarray, strides: np.ndarray,
                       image_size: int, reg_max: int, summed=None, box_iou: str = "ciou"):
    """(yolo_loss's four terms, the assignment they were computed with): a head with more outputs adds its own terms
    on the same positive anchor points."""
    box_dist = tf.cast(box_dist, tf.float32)
    class_logits = tf.cast(class_logits, tf.float32)
    centres_t = tf.constant(centres, tf.float32)
    strides_t = tf.constant(strides, tf.float32)
    gt = tf.gather(tf.cast(gt_boxes, tf.float32), [1, 0, 3, 2], axis=-1) * float(image_size)  # x1, y1, x2, y2 pixels
    pred_boxes = decode_boxes(box_dist, centres_t, strides_t, reg_max)
    targets = assign(tf.sigmoid(class_logits), pred_boxes, centres_t, gt, tf.cast(gt_classes, tf.int32), gt_mask)
    target_sum = tf.reduce_sum(targets.scores)
    normalizer = tf.maximum(summed(target_sum) if summed is not None else target_sum, 1.0)
    class_loss = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=targets.scores, logits=class_logits)) / normalizer
    weight = tf.reduce_sum(targets.scores, axis=-1) * tf.cast(targets.positive, tf.float32)  # [B, N]
    box_loss = tf.reduce_sum((1.0 - BOX_IOU[box_iou](pred_boxes, targets.boxes)) * weight) / normalizer
    sides = tf.concat([centres_t[None] - targets.boxes[..., :2], targets.boxes[..., 2:] - centres_t[None]], -1)
    dfl_loss = tf.reduce_sum(dfl(box_dist, sides / strides_t[None, :, None], reg_max) * weight) / normalizer
    total = WEIGHTS["class"] * class_loss + WEIGHTS["box"] * box_loss + WEIGHTS["dfl"] * dfl_loss
    return (total, class_loss, box_loss, dfl_loss), targets

