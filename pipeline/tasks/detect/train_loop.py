"""A plain training loop for the detector, for test fixtures that need a trained detector in seconds without
a run directory (`pipeline train --task detect` trains through pipeline/training/fit.py instead)."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

from pipeline.tasks.detect.data.augment import dataset, with_targets
from pipeline.tasks.detect.data.examples import DetExample
from pipeline.tasks.detect.evaluate import Detections
from pipeline.tasks.detect.heads.ssd import infer
from pipeline.tasks.detect.heads.ssd.loss import detection_loss


def fit(model, examples: Sequence[DetExample], anchor_boxes: np.ndarray, image_size: int, steps: int,
        batch_size: int = 16, learning_rate: float = 3e-3, seed: int = 0, resize: str = "stretch") -> List[float]:
    """Train `model` for `steps` steps (Adam, cosine decay); returns the loss of each step."""
    ds = with_targets(dataset(examples, image_size, training=True, seed=seed, resize=resize), anchor_boxes)
    ds = ds.batch(batch_size, drop_remainder=True).prefetch(2)
    optimizer = keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(learning_rate, steps, alpha=0.02))

    @tf.function
    def step(images, targets):
        with tf.GradientTape() as tape:
            out = model(tf.cast(images, tf.float32), training=True)
            loss, _, _ = detection_loss(targets["box_targets"], targets["class_targets"], out["box_codes"], out["class_logits"])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return [float(step(images, targets)) for images, targets in ds.take(steps)]


def predict(model, examples: Sequence[DetExample], anchor_boxes: np.ndarray, image_size: int, resize: str = "stretch",
            score_threshold: float = 0.05, max_detections: int = 100, iou_threshold: float = 0.5,
            batch_size: int = 32) -> List[Detections]:
    """The stage's prediction (pipeline/tasks/detect/heads/ssd/infer.py) with the NMS settings as keywords."""
    return infer.predict(model, examples, anchor_boxes, image_size, resize, infer.Nms(score_threshold, iou_threshold, max_detections),
                         batch_size)
