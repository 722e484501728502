"""The SSD head as `model.fit` trains it: the detection trainer (pipeline/tasks/detect/trainer.py) with the focal + box
loss (loss.py) over anchor targets (targets.py), normalized by the positive anchors of the whole global batch."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf
import tf_keras as keras

from pipeline.tasks.detect.heads.ssd.loss import detection_loss
from pipeline.tasks.detect.trainer import DetectorTraining, named_outputs


class SsdTraining(DetectorTraining):
    """Data is (images, {"box_targets": [B, A, 4], "class_targets": [B, A]}) (targets.with_targets)."""

    def _loss_terms(self, data, training: bool):
        images, targets = data
        out = self(images, training=training)
        context = tf.distribute.get_replica_context()
        positives = tf.reduce_sum(tf.cast(targets["class_targets"] > 0, tf.float32))
        replicas = 1
        if context is not None:
            positives = context.all_reduce(tf.distribute.ReduceOp.SUM, positives)
            replicas = context.num_replicas_in_sync
        losses = detection_loss(targets["box_targets"], targets["class_targets"], out["box_codes"], out["class_logits"],
                                normalizer=tf.maximum(positives, 1.0))
        return losses, replicas


def training_model(detector: keras.Model) -> SsdTraining:
    """`detector`'s layers, trained by `fit` with the detection loss; outputs stay named."""
    return SsdTraining(detector.inputs, named_outputs(detector), name=detector.name)
