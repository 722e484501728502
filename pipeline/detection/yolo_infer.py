"""The anchor-free head's answers on images, two ways:

- `predict`: the held-out evaluation after training, decoded in TensorFlow and suppressed per class by
  `combined_non_max_suppression` with the same `Nms` settings as the SSD head's (infer.py), so the two heads' training
  reports score alike;
- `float_detections`: the float Keras model on contract pixels, decoded by edge/yolo_decode.py as the exported files
  are on the device, for parity's reference row (the same decode and NMS as every TFLite row).
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import tensorflow as tf

from models.yolo_head import REG_MAX, anchor_points
from pipeline.detection.augment import dataset
from pipeline.detection.evaluate import Detections
from pipeline.detection.examples import DetExample
from pipeline.detection.infer import Nms, _unletterboxed
from pipeline.detection.yolo_loss import decode_boxes


def predict(model, examples: Sequence[DetExample], image_size: int, resize: str = "stretch", nms: Nms = Nms(),
            batch_size: int = 32) -> List[Detections]:
    """One `Detections` per example, in order; `model` outputs box_dist and class_logits (models/yolo_head.py)."""
    ds = dataset(examples, image_size, training=False, resize=resize).batch(batch_size)
    centres, strides = (tf.constant(a) for a in anchor_points(image_size))

    @tf.function
    def infer(images):
        out = model(tf.cast(images, tf.float32), training=False)
        xyxy = decode_boxes(tf.cast(out["box_dist"], tf.float32), centres, strides, REG_MAX) / float(image_size)
        boxes = tf.gather(xyxy, [1, 0, 3, 2], axis=-1)
        scores = tf.sigmoid(tf.cast(out["class_logits"], tf.float32))
        return tf.image.combined_non_max_suppression(
            boxes[:, :, None, :], scores, max_output_size_per_class=nms.max_detections, max_total_size=nms.max_detections,
            iou_threshold=nms.iou_threshold, score_threshold=nms.score_threshold, clip_boxes=True)

    results = []
    for item in ds:
        found = infer(item["image"])
        for b, s, c, n in zip(*(t.numpy() for t in found)):
            results.append(Detections(b[:n], c[:n].astype(np.int32), s[:n]))
    if resize == "letterbox":
        results = [_unletterboxed(r, e) for r, e in zip(results, examples)]
    return results


def float_detections(model, pixels: Sequence[np.ndarray]) -> List[Detections]:
    """The float Keras model's detections on contract pixels [S, S, 3] at its input size, decoded as on the device."""
    from edge import yolo_decode

    found = []
    for image in pixels:
        out = model(tf.cast(image[None], tf.float32), training=False)
        height, width = image.shape[:2]
        centres, strides = yolo_decode.anchor_points(height, width)
        layout = yolo_decode.Layout(0, 1, (0.0, 0), (0.0, 0), height, width, centres, strides)
        boxes, classes, scores = yolo_decode.decode(out["box_dist"][0].numpy(), out["class_logits"][0].numpy(), layout)
        found.append(Detections(np.clip(boxes, 0.0, 1.0), classes.astype(np.int32), scores))
    return found
