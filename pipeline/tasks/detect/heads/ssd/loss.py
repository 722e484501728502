"""The detector's training loss: sigmoid focal loss on classes over every anchor not ignored, plus Huber
on the box codes of positive anchors, both divided by the number of positive anchors."""
from __future__ import annotations

import tensorflow as tf


def detection_loss(box_targets, class_targets, box_codes, class_logits, alpha: float = 0.25, gamma: float = 2.0,
                   delta: float = 1.0, box_weight: float = 1.0, normalizer=None):
    """Per-batch mean losses. box_targets [B, A, 4], class_targets [B, A] (0 background, c + 1, -1 ignored),
    box_codes [B, A, 4], class_logits [B, A, C + 1] (column 0 background, as the post-processing op
    expects; not trained). `normalizer`: the positive anchors to divide by (training across replicas passes
    the global batch's count); None = this batch's, at least 1. Returns (total, class loss, box loss)."""
    box_codes = tf.cast(box_codes, tf.float32)
    class_logits = tf.cast(class_logits, tf.float32)
    positive = tf.cast(class_targets > 0, tf.float32)
    counted = tf.cast(class_targets >= 0, tf.float32)
    if normalizer is None:
        normalizer = tf.maximum(tf.reduce_sum(positive), 1.0)

    # Column 0 (background) is left out: the post-processing op skips it, and training it towards 1 on
    # every negative anchor would swamp the focal loss of the object columns.
    class_logits = class_logits[..., 1:]
    onehot = tf.one_hot(class_targets - 1, tf.shape(class_logits)[-1])  # background (0) and ignored (-1): all zero
    ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=onehot, logits=class_logits)
    p = tf.sigmoid(class_logits)
    p_t = onehot * p + (1 - onehot) * (1 - p)
    alpha_t = onehot * alpha + (1 - onehot) * (1 - alpha)
    focal = alpha_t * tf.pow(1 - p_t, gamma) * ce
    class_loss = tf.reduce_sum(focal * counted[..., None]) / normalizer

    error = tf.abs(box_targets - box_codes)
    quadratic = tf.minimum(error, delta)
    per_anchor = 0.5 * quadratic ** 2 + delta * (error - quadratic)  # Huber, [B, A, 4]
    box_loss = tf.reduce_sum(tf.reduce_sum(per_anchor, -1) * positive) / normalizer
    return class_loss + box_weight * box_loss, class_loss, box_loss
