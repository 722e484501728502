"""The detector as `model.fit` trains it: a functional Keras model whose train_step and test_step compute
the focal + box loss (loss.py), so detection goes through the same machinery as classification
(strategies, steps_per_execution, callbacks, BackupAndRestore, BatchNorm estimates).

The loss is normalized by the positive anchors of the whole global batch, summed across replicas: each
replica's share is its own sum over that one count, and the optimizer's cross-replica sum of gradients
is then the gradient of the global loss, whatever the number of replicas.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf
import tf_keras as keras

from pipeline.tasks.detect.heads.ssd.loss import detection_loss


class DetectorTraining(keras.Model):
    """Built as `DetectorTraining(inputs, outputs)` over the detector's layers; data is (images, targets)
    with targets {"box_targets": [B, A, 4], "class_targets": [B, A]} (augment.with_targets)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trackers = [keras.metrics.Mean(name) for name in ("loss", "class_loss", "box_loss")]

    @property
    def metrics(self):
        return self.trackers

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

    def _tracked(self, losses, replicas):
        # Each replica holds its share of the global loss; the trackers' cross-replica mean times the
        # replica count is the global batch's loss.
        for tracker, value in zip(self.trackers, losses):
            tracker.update_state(value * replicas)
        return {t.name: t.result() for t in self.trackers}

    def train_step(self, data):
        with tf.GradientTape() as tape:
            losses, replicas = self._loss_terms(data, training=True)
            total = losses[0] + tf.add_n(self.losses) if self.losses else losses[0]
        gradients = tape.gradient(total, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        return self._tracked(losses, replicas)

    def test_step(self, data):
        losses, replicas = self._loss_terms(data, training=False)
        return self._tracked(losses, replicas)


def training_model(detector: keras.Model) -> DetectorTraining:
    """`detector`'s layers, trained by `fit` with the detection loss; outputs stay named."""
    return DetectorTraining(detector.inputs, named_outputs(detector), name=detector.name)


def plain(model: keras.Model) -> keras.Model:
    """The same layers as a plain functional model: what is saved, loadable without this module."""
    return keras.Model(model.inputs, named_outputs(model), name=model.name)


def named_outputs(model: keras.Model) -> dict:
    """{"box_codes": .., "class_logits": ..}: Keras lists a dict of outputs flat, in output_names' order."""
    return dict(zip(model.output_names, model.outputs))
