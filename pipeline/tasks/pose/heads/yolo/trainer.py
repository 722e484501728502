"""The pose head as `model.fit` trains it: the YOLO detector's training model (detect's YoloTraining) with the keypoint
terms added to its loss (loss.py). Data is (images, {"boxes", "classes", "mask", "keypoints"}): the padded ground truth
itself, as the detector's, since the assignment needs the predictions."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Sequence

import tensorflow as tf
import tf_keras as keras

from pipeline.tasks.detect.heads.yolo.model import REG_MAX
from pipeline.tasks.detect.heads.yolo.trainer import YoloTraining
from pipeline.tasks.detect.trainer import named_outputs
from pipeline.tasks.pose.heads.yolo.loss import pose_loss

LOSSES = ("loss", "class_loss", "box_loss", "dfl_loss", "keypoint_loss", "visibility_loss")
TARGETS = ("boxes", "classes", "mask", "keypoints")


class PoseTraining(YoloTraining):
    """Built as `PoseTraining(inputs, outputs)` over the pose model's layers, then `sigmas` set (one per keypoint)."""

    sigmas: Sequence[float] = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trackers = [keras.metrics.Mean(name) for name in LOSSES]

    def _loss_terms(self, data, training: bool):
        images, truth = data
        out = self(images, training=training)
        context = tf.distribute.get_replica_context()
        replicas, summed = 1, None
        if context is not None:
            replicas = context.num_replicas_in_sync
            summed = lambda local: context.all_reduce(tf.distribute.ReduceOp.SUM, local)  # noqa: E731
        losses = pose_loss(out["box_dist"], out["class_logits"], out["keypoints"], truth["boxes"], truth["classes"],
                           truth["mask"], truth["keypoints"], self.sigmas, self._centres, self._strides, self._image_size,
                           REG_MAX, summed=summed, box_iou=self.box_iou)
        return losses, replicas


def training_model(model: keras.Model, sigmas: Sequence[float]) -> PoseTraining:
    """`model`'s layers (pose model: box_dist, class_logits, keypoints), trained by `fit` with the pose loss."""
    k = int(model.output_shape["keypoints"][-1]) // 3 if isinstance(model.output_shape, dict) else None
    if k is not None and k != len(sigmas):
        raise ValueError(f"{len(sigmas)} OKS sigmas for a model with {k} keypoints; expected one per keypoint")
    trained = PoseTraining(model.inputs, named_outputs(model), name=model.name)
    trained.sigmas = tuple(float(s) for s in sigmas)
    return trained


def with_truth(ds: tf.data.Dataset) -> tf.data.Dataset:
    """(image, {boxes, classes, mask, keypoints}) from the pose input pipeline's fitted items."""
    return ds.map(lambda item: (item["image"], {key: item[key] for key in TARGETS}),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
