"""The anchor-free head as `model.fit` trains it: the SSD detector's training model (trainer.py) with YOLOv8's loss
(yolo_loss.py), so strategies, steps_per_execution, callbacks, BackupAndRestore and BatchNorm estimates work alike.

Data is (images, {"boxes", "classes", "mask"}): the padded ground truth itself, since the task-aligned assignment
needs the predictions. The loss is divided by the class-target sum of the whole global batch, summed across
replicas, for the reason trainer.py gives.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf
import tf_keras as keras

from pipeline.tasks.detect.heads.yolo.model import REG_MAX, anchor_points
from pipeline.tasks.detect.trainer import DetectorTraining, named_outputs
from pipeline.tasks.detect.heads.yolo.loss import yolo_loss

LOSSES = ("loss", "class_loss", "box_loss", "dfl_loss")


class YoloTraining(DetectorTraining):
    """Built as `YoloTraining(inputs, outputs)` over the head's layers (outputs box_dist and class_logits)."""

    box_iou = "ciou"  # the box loss's IoU (yolo_loss.BOX_IOU): YOLOv8's CIoU

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trackers = [keras.metrics.Mean(name) for name in LOSSES]
        size = int(self.inputs[0].shape[1])
        self._image_size = size
        self._centres, self._strides = anchor_points(size)

    def _loss_terms(self, data, training: bool):
        images, truth = data
        out = self(images, training=training)
        context = tf.distribute.get_replica_context()
        replicas = 1
        summed = None
        if context is not None:
            replicas = context.num_replicas_in_sync
            summed = lambda local: context.all_reduce(tf.distribute.ReduceOp.SUM, local)  # noqa: E731
        losses = yolo_loss(out["box_dist"], out["class_logits"], truth["boxes"], truth["classes"], truth["mask"],
                           self._centres, self._strides, self._image_size, REG_MAX, summed=summed, box_iou=self.box_iou)
        return losses, replicas


def training_model(detector: keras.Model) -> YoloTraining:
    """`detector`'s layers, trained by `fit` with YOLOv8's loss; outputs stay named."""
    return YoloTraining(detector.inputs, named_outputs(detector), name=detector.name)


def with_truth(ds: tf.data.Dataset) -> tf.data.Dataset:
    """(image, {boxes, classes, mask}) from the input pipeline's fitted items: what YoloTraining takes."""
    return ds.map(lambda item: (item["image"], {"boxes": item["boxes"], "classes": item["classes"], "mask": item["mask"]}),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
