"""The SSD detector's answers on images, two ways:

- `predict`: the held-out evaluation after training, box codes decoded against the anchors, then per-class non-maximum
  suppression (pipeline/tasks/detect/infer.py); boxes in each image's own normalized coordinates;
- `float_detections`: the float Keras model on contract pixels, post-processed as TFLite_Detection_PostProcess does
  (decode against the anchors, one class per box, class-agnostic NMS, the op's thresholds), for parity's reference row,
  so the comparison is of the models, not of two post-processing recipes."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.data.examples import DetExample
from pipeline.tasks.detect.evaluate import Detections
from pipeline.tasks.detect.heads.ssd.anchors import anchors, decode
from pipeline.tasks.detect.infer import Nms, predict_with


def predict(model, examples: Sequence[DetExample], anchor_boxes: np.ndarray, image_size: int, resize: str = "stretch",
            nms: Nms = Nms(), batch_size: int = 32) -> List[Detections]:
    """One `Detections` per example, in order. `model` outputs box_codes and class_logits (pipeline/tasks/detect/heads/ssd/model.py)."""
    anchor_t = tf.constant(anchor_boxes)

    def boxes_and_scores(images):
        out = model(images, training=False)
        return decode(out["box_codes"], anchor_t), tf.sigmoid(out["class_logits"])[..., 1:]

    return predict_with(boxes_and_scores, examples, image_size, resize, nms, batch_size)


def float_detections(model, spec, image_size: int, pixels: Sequence[np.ndarray]) -> List[Detections]:
    """The float Keras model's detections on contract pixels, post-processed as TFLite_Detection_PostProcess does."""
    from pipeline.tasks.detect.heads.ssd.postprocess import Settings

    settings = Settings()
    anchor_t = tf.constant(anchors(image_size, spec))
    found = []
    for image in pixels:
        out = model(tf.cast(image[None], tf.float32), training=False)
        boxes = tf.clip_by_value(decode(out["box_codes"], anchor_t)[0], 0.0, 1.0)
        scores = tf.sigmoid(out["class_logits"])[0, :, 1:]
        best, classes = tf.reduce_max(scores, -1), tf.argmax(scores, -1, output_type=tf.int32)
        keep = tf.image.non_max_suppression(boxes, best, settings.max_detections, settings.iou_threshold, settings.score_threshold)
        found.append(Detections(tf.gather(boxes, keep).numpy(), tf.gather(classes, keep).numpy(), tf.gather(best, keep).numpy()))
    return found
