"""The anchor-free head's answers on images, two ways:

- `predict`: the held-out evaluation after training, decoded in TensorFlow and suppressed per class by
  `combined_non_max_suppression` with the same `Nms` settings as the SSD head's (infer.py), so the two heads' training
  reports score alike;
- `float_detections`: the float Keras model on contract pixels, decoded by edge/answers/heads/yolo.py as the exported files
  are on the device, for parity's reference row (the same decode and NMS as every TFLite row).
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.yolo.model import REG_MAX, anchor_points
from pipeline.tasks.detect.evaluate import Detections
from pipeline.tasks.detect.data.examples import DetExample
from pipeline.tasks.detect.heads.ssd.infer import Nms, predict_with
from pipeline.tasks.detect.heads.yolo.loss import decode_boxes


def predict(model, examples: Sequence[DetExample], image_size: int, resize: str = "stretch", nms: Nms = Nms(),
            batch_size: int = 32) -> List[Detections]:
    """One `Detections` per example, in order; `model` outputs box_dist and class_logits (pipeline/tasks/detect/heads/yolo/model.py)."""
    centres, strides = (tf.constant(a) for a in anchor_points(image_size))

    def boxes_and_scores(images):
        out = model(images, training=False)
        xyxy = decode_boxes(tf.cast(out["box_dist"], tf.float32), centres, strides, REG_MAX) / float(image_size)
        return tf.gather(xyxy, [1, 0, 3, 2], axis=-1), tf.sigmoid(tf.cast(out["class_logits"], tf.float32))

    return predict_with(boxes_and_scores, examples, image_size, resize, nms, batch_size)


def float_detections(model, pixels: Sequence[np.ndarray]) -> List[Detections]:
    """The float Keras model's detections on contract pixels [S, S, 3] at its input size, decoded as on the device."""
    from edge.answers.heads import yolo as yolo_decode

    found = []
    for image in pixels:
        out = model(tf.cast(image[None], tf.float32), training=False)
        height, width = image.shape[:2]
        centres, strides = yolo_decode.anchor_points(height, width)
        layout = yolo_decode.Layout(0, 1, (0.0, 0), (0.0, 0), height, width, centres, strides)
        boxes, classes, scores = yolo_decode.decode(out["box_dist"][0].numpy(), out["class_logits"][0].numpy(), layout)
        found.append(Detections(np.clip(boxes, 0.0, 1.0), classes.astype(np.int32), scores))
    return found
