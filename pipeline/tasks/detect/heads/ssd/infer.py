"""The trained detector's answers on images: box codes decoded against the anchors, then per-class
non-maximum suppression, as TFLite's detection post-processing does it; boxes in each image's own
normalized coordinates."""
from __future__ import annotations

from typing import List, NamedTuple, Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.ssd.anchors import decode
from pipeline.tasks.detect.data.augment import dataset
from pipeline.tasks.detect.evaluate import Detections
from pipeline.tasks.detect.data.examples import DetExample


class Nms(NamedTuple):
    score_threshold: float = 0.05  # COCO evaluation keeps low scores: they add recall at no precision cost
    iou_threshold: float = 0.5
    max_detections: int = 100

    def as_dict(self) -> dict:
        return self._asdict()


def predict(model, examples: Sequence[DetExample], anchor_boxes: np.ndarray, image_size: int, resize: str = "stretch",
            nms: Nms = Nms(), batch_size: int = 32) -> List[Detections]:
    """One `Detections` per example, in order. `model` outputs box_codes and class_logits (pipeline/tasks/detect/heads/ssd/model.py)."""
    anchor_t = tf.constant(anchor_boxes)

    def boxes_and_scores(images):
        out = model(images, training=False)
        return decode(out["box_codes"], anchor_t), tf.sigmoid(out["class_logits"])[..., 1:]

    return predict_with(boxes_and_scores, examples, image_size, resize, nms, batch_size)


def predict_with(boxes_and_scores, examples: Sequence[DetExample], image_size: int, resize: str = "stretch",
                 nms: Nms = Nms(), batch_size: int = 32) -> List[Detections]:
    """`predict` for any head: `boxes_and_scores(float images)` -> (corner boxes [B, A, 4] normalized to the input,
    per-class scores [B, A, C]), then per-class NMS."""
    ds = dataset(examples, image_size, training=False, resize=resize).batch(batch_size)

    @tf.function
    def infer(images):
        boxes, scores = boxes_and_scores(tf.cast(images, tf.float32))
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


def _unletterboxed(d: Detections, e: DetExample) -> Detections:
    """Letterboxed boxes (image in the top-left corner) back to the image's own normalized coordinates."""
    scale = max(e.height, e.width)
    share = np.array([e.height / scale, e.width / scale] * 2, np.float32)
    return Detections(np.clip(d.boxes / share, 0, 1), d.classes, d.scores)
