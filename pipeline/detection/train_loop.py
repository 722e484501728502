"""A plain training loop for the detector and its prediction, for tests and the bench (the `pipeline
train` stage will drive the same loss and data through its own machinery)."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

from pipeline.detection.anchors import decode
from pipeline.detection.augment import dataset, with_targets
from pipeline.detection.evaluate import Detections
from pipeline.detection.examples import DetExample
from pipeline.detection.loss import detection_loss


def fit(model, examples: Sequence[DetExample], anchor_boxes: np.ndarray, image_size: int, steps: int,
        batch_size: int = 16, learning_rate: float = 3e-3, seed: int = 0, resize: str = "stretch") -> List[float]:
    """Train `model` for `steps` steps (Adam, cosine decay); returns the loss of each step."""
    ds = with_targets(dataset(examples, image_size, training=True, seed=seed, resize=resize), anchor_boxes)
    ds = ds.batch(batch_size, drop_remainder=True).prefetch(2)
    optimizer = keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(learning_rate, steps, alpha=0.02))

    @tf.function
    def step(images, targets):
        with tf.GradientTape() as tape:
            out = model(images, training=True)
            loss, _, _ = detection_loss(targets["box_targets"], targets["class_targets"], out["box_codes"], out["class_logits"])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses = []
    for images, targets in ds.take(steps):
        losses.append(float(step(images, targets)))
    return losses


def predict(model, examples: Sequence[DetExample], anchor_boxes: np.ndarray, image_size: int,
            resize: str = "stretch", score_threshold: float = 0.05, max_detections: int = 100,
            iou_threshold: float = 0.5, batch_size: int = 32) -> List[Detections]:
    """Per-class non-maximum suppression over decoded boxes, boxes in each original image's coordinates."""
    ds = dataset(examples, image_size, training=False, resize=resize).batch(batch_size)
    anchor_t = tf.constant(anchor_boxes)

    @tf.function
    def infer(images):
        out = model(images, training=False)
        boxes = decode(out["box_codes"], anchor_t)
        scores = tf.sigmoid(out["class_logits"])[..., 1:]
        return tf.image.combined_non_max_suppression(
            boxes[:, :, None, :], scores, max_output_size_per_class=max_detections, max_total_size=max_detections,
            iou_threshold=iou_threshold, score_threshold=score_threshold, clip_boxes=True)

    results = []
    for item in ds:
        nms = infer(item["image"])
        for b, s, c, n in zip(*(t.numpy() for t in nms)):
            results.append(Detections(b[:n], c[:n].astype(np.int32), s[:n]))
    if resize == "letterbox":
        results = [_unletterboxed(r, e) for r, e in zip(results, examples)]
    return results


def _unletterboxed(d: Detections, e: DetExample) -> Detections:
    """Letterboxed boxes (image in the top-left corner) back to the image's own normalized coordinates."""
    scale = max(e.height, e.width)
    share = np.array([e.height / scale, e.width / scale] * 2, np.float32)
    return Detections(np.clip(d.boxes / share, 0, 1), d.classes, d.scores)
