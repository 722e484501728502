"""The pose head's training loss: the YOLO detector's (pipeline/tasks/detect/heads/yolo/loss.py: task-aligned assignment,
BCE on classes, CIoU and DFL on boxes) plus YOLOv8-pose's two keypoint terms on the same positive anchor points, each
point's keypoints taken from the ground-truth object the assignment gave it:

- location: 1 - exp(-d^2 / (2 * (2 sigma)^2 * area)), an OKS-shaped error per keypoint (d the distance to the labelled
  keypoint, sigma the keypoint's OKS constant, area the object's box area), averaged over the object's labelled
  keypoints, then over the positive points;
- visibility: BCE of the visibility logit against "labelled" (visibility 1 or 2), over the positive points' keypoints.

Gains 12 and 1 (Ultralytics' pose and kobj defaults) beside the detector's 0.5, 7.5 and 1.5. Both are divided by the
global batch's count of positive points, summed across replicas as the detector's terms are.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.yolo.assign import EPS
from pipeline.tasks.detect.heads.yolo.loss import WEIGHTS as DETECTOR_WEIGHTS
from pipeline.tasks.detect.heads.yolo.loss import yolo_loss_assigned

WEIGHTS = {**DETECTOR_WEIGHTS, "keypoint": 12.0, "visibility": 1.0}


def keypoint_positions(keypoints, centres, strides):
    """[B, N, 3K] raw outputs -> ([B, N, K, 2] x, y in input pixels, [B, N, K] visibility logits)."""
    shape = tf.shape(keypoints)
    points = tf.reshape(keypoints, [shape[0], shape[1], -1, 3])
    xy = centres[None, :, None, :] + points[..., :2] * strides[None, :, None, None]
    return xy, points[..., 2]


def keypoint_terms(keypoints, gt_keypoints, assigned, sigmas: Sequence[float], centres, strides, image_size: int,
                   summed=None):
    """(location loss, visibility loss) on the positive points of `assigned` (detect's Assigned, with `owner`).
    gt_keypoints [B, M, K, 3]: x, y normalized to the input, visibility 0 (not labelled), 1 or 2."""
    xy, visibility = keypoint_positions(tf.cast(keypoints, tf.float32), centres, strides)
    truth = tf.gather(tf.cast(gt_keypoints, tf.float32), assigned.owner, batch_dims=1)  # [B, N, K, 3]
    labelled = tf.cast(truth[..., 2] > 0, tf.float32)
    d2 = tf.reduce_sum(tf.square(xy - truth[..., :2] * float(image_size)), axis=-1)
    box = assigned.boxes
    area = (box[..., 2] - box[..., 0]) * (box[..., 3] - box[..., 1])  # [B, N] the owner's box, pixels
    sigma = tf.constant(np.asarray(sigmas, np.float32))
    e = d2 / (tf.square(2.0 * sigma) * (area[..., None] + EPS) * 2.0)
    per_point = tf.math.divide_no_nan(tf.reduce_sum((1.0 - tf.exp(-e)) * labelled, -1), tf.reduce_sum(labelled, -1))
    positive = tf.cast(assigned.positive, tf.float32)
    count = tf.reduce_sum(positive)
    count = tf.maximum(summed(count) if summed is not None else count, 1.0)
    location = tf.reduce_sum(per_point * positive) / count
    bce = tf.nn.sigmoid_cross_entropy_with_logits(labels=labelled, logits=visibility)
    visible = tf.reduce_sum(tf.reduce_mean(bce, -1) * positive) / count
    return location, visible


def pose_loss(box_dist, class_logits, keypoints, gt_boxes, gt_classes, gt_mask, gt_keypoints, sigmas: Sequence[float],
              centres: np.ndarray, strides: np.ndarray, image_size: int, reg_max: int, summed=None, box_iou: str = "ciou"):
    """(total, class, box, dfl, keypoint, visibility losses) for one batch; the detector's arguments as yolo_loss's."""
    (total, class_loss, box_loss, dfl_loss), assigned = yolo_loss_assigned(
        box_dist, class_logits, gt_boxes, gt_classes, gt_mask, centres, strides, image_size, reg_max, summed, box_iou)
    location, visible = keypoint_terms(keypoints, gt_keypoints, assigned, sigmas, tf.constant(centres, tf.float32),
                                       tf.constant(strides, tf.float32), image_size, summed)
    total = total + WEIGHTS["keypoint"] * location + WEIGHTS["visibility"] * visible
    return total, class_loss, box_loss, dfl_loss, location, visible
