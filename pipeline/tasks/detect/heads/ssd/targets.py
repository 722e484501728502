"""What the SSD head's training step takes: each anchor's box and class target, assigned on the input side."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.ssd.anchors import assign


def with_targets(ds: tf.data.Dataset, anchor_boxes: np.ndarray) -> tf.data.Dataset:
    """(image, {box_targets [A, 4], class_targets [A]}) for training, assigned on the input side."""
    anchor_t = tf.constant(anchor_boxes)

    def targets(item):
        box_targets, class_targets = assign(anchor_t, item["boxes"], item["classes"], item["mask"])
        return item["image"], {"box_targets": box_targets, "class_targets": class_targets}

    return ds.map(targets, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
