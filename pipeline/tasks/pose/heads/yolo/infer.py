"""The pose head's answers on images, in TensorFlow on the host:

- `predict`: the held-out evaluation after training (the float Keras model on the task's examples), suppressed per
  class with the detection task's `Nms` settings, as the detector's `predict` is;
- `decode` / `file_poses`: the outputs of a model as stored (the Keras model's, or the exported file's, dequantized),
  decoded in TensorFlow and kept as the device keeps them (one class per point, class-agnostic NMS, the device's
  `Settings`): the host's own reading of a .tflite file, which the device's numpy decoding
  (edge/answers/heads/keypoints.py) must equal;
- `float_poses`: the float Keras model on contract pixels, decoded by the device's decoding, for parity's reference.

Poses are normalized to each image: boxes (ymin, xmin, ymax, xmax), keypoints (x, y, score).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.yolo.loss import decode_boxes
from pipeline.tasks.detect.heads.yolo.model import REG_MAX, anchor_points
from pipeline.tasks.detect.infer import Nms
from pipeline.tasks.pose.heads.yolo.loss import keypoint_positions
from pipeline.tasks.pose.poses import Poses


def decode(box_dist, class_logits, keypoints, image_size: int):
    """Float outputs [B, N, ...] -> (boxes [B, N, 4] normalized ymin, xmin, ymax, xmax; scores [B, N, C];
    keypoints [B, N, K, 3] normalized x, y and the visibility probability), tensors."""
    centres, strides = (tf.constant(a) for a in anchor_points(image_size))
    xyxy = decode_boxes(tf.cast(box_dist, tf.float32), centres, strides, REG_MAX) / float(image_size)
    xy, visibility = keypoint_positions(tf.cast(keypoints, tf.float32), centres, strides)
    points = tf.concat([xy / float(image_size), tf.sigmoid(visibility)[..., None]], axis=-1)
    return tf.gather(xyxy, [1, 0, 3, 2], axis=-1), tf.sigmoid(tf.cast(class_logits, tf.float32)), points


def kept(boxes: np.ndarray, scores: np.ndarray, keypoints: np.ndarray, nms: Nms, per_class: bool = True) -> Poses:
    """One image's decoded points ([N, 4], [N, C], [N, K, 3]) after NMS, best first: per class (every point and class
    scoring at least the threshold is a candidate, as combined NMS takes them), or, `per_class` False, the device's
    way: each point's best class only, then class-agnostic NMS."""
    from edge.answers.heads.yolo import nms as greedy_nms

    if per_class:
        points, classes = np.nonzero(scores >= nms.score_threshold)
    else:
        points = np.arange(len(scores))
        classes = np.argmax(scores, axis=1)
        points = points[scores[points, classes] >= nms.score_threshold]
        classes = classes[points]
    found = scores[points, classes].astype(np.float32)
    # Per class by moving each class's boxes 2 units apart: no box of one class then overlaps one of another.
    shifted = boxes[points] + (2.0 * classes[:, None] if per_class else 0.0)
    chosen = greedy_nms(shifted.astype(np.float32), found, nms.iou_threshold, nms.max_detections)
    if not len(chosen):
        return Poses.empty(keypoints.shape[1])
    at = points[chosen]
    # Inside the image, as the boxes: a keypoint predicted beyond the edge is at the edge.
    points = np.concatenate([np.clip(keypoints[at][..., :2], 0.0, 1.0), keypoints[at][..., 2:]], axis=-1)
    return Poses(np.clip(boxes[at], 0.0, 1.0).astype(np.float32), classes[chosen].astype(np.int32), found[chosen],
                 points.astype(np.float32))


def predict(model, examples: Sequence, image_size: int, resize: str = "stretch", nms: Nms = Nms(),
            batch_size: int = 32) -> List[Poses]:
    """One `Poses` per example, in order, normalized to each example's image (letterboxed inputs mapped back)."""
    from pipeline.tasks.detect.data.augment import dataset

    @tf.function
    def infer(images):
        out = model(tf.cast(images, tf.float32), training=False)
        return decode(out["box_dist"], out["class_logits"], out["keypoints"], image_size)

    found: List[Poses] = []
    for item in dataset(examples, image_size, training=False, resize=resize).batch(batch_size):
        for boxes, scores, points in zip(*(t.numpy() for t in infer(item["image"]))):
            found.append(kept(boxes, scores, points, nms))
    if resize == "letterbox":
        found = [_unletterboxed(p, e.height, e.width) for p, e in zip(found, examples)]
    return found


def _unletterboxed(poses: Poses, height: int, width: int) -> Poses:
    """Letterboxed answers (the image in the top-left corner) back to the image's own normalized coordinates."""
    scale = max(height, width)
    share_y, share_x = height / scale, width / scale
    points = poses.keypoints.copy()  # inside the input already (kept)
    points[..., 0] = np.clip(points[..., 0] / share_x, 0.0, 1.0)
    points[..., 1] = np.clip(points[..., 1] / share_y, 0.0, 1.0)
    boxes = np.clip(poses.boxes / np.array([share_y, share_x] * 2, np.float32), 0.0, 1.0)
    return Poses(boxes.astype(np.float32), poses.classes, poses.scores, points)


def device_nms() -> Nms:
    """The device's settings (edge/answers/heads/yolo.py's Settings) as an Nms."""
    from edge.answers.heads.yolo import Settings

    s = Settings()
    return Nms(s.score_threshold, s.iou_threshold, s.max_detections)


def file_poses(outputs: Dict[str, np.ndarray], image_size: int, nms: Optional[Nms] = None) -> Poses:
    """One image's outputs as stored in an exported file, dequantized to float ({"box_dist": [N, 64],
    "class_logits": [N, C], "keypoints": [N, 3K]}), decoded here in TensorFlow and kept the device's way."""
    boxes, scores, points = decode(*(np.asarray(outputs[k], np.float32)[None] for k in ("box_dist", "class_logits", "keypoints")),
                                   image_size)
    return kept(boxes.numpy()[0], scores.numpy()[0], points.numpy()[0], nms or device_nms(), per_class=False)


def tflite_poses(model: bytes, pixels: Sequence[np.ndarray], nms: Optional[Nms] = None) -> List[Poses]:
    """An exported file's poses on contract pixels [S, S, 3] (uint8 for the int8 file, as the device feeds it; float
    for the float twin), run in the CPU interpreter the device would pick and decoded by `file_poses`."""
    from edge.answers.heads.keypoints import find_layout, roles
    from edge.model.interpreter import make_interpreter

    interpreter = make_interpreter(model, edgetpu=False)
    layout = find_layout(interpreter)
    if layout is None:
        raise ValueError("the file's outputs are not a pose model's three (box distributions, class logits, keypoints)")
    detail = interpreter.get_input_details()[0]
    by_index = {int(d["index"]): d for d in interpreter.get_output_details()}
    found = []
    for image in pixels:
        interpreter.set_tensor(detail["index"], np.asarray(image, detail["dtype"])[None])
        interpreter.invoke()
        outputs = {}
        for role, index in roles(layout).items():
            scale, zero = by_index[index]["quantization"]
            values = interpreter.get_tensor(index)[0]
            outputs[role] = (values.astype(np.float32) - zero) * scale if scale else values.astype(np.float32)
        found.append(file_poses(outputs, int(detail["shape"][1]), nms))
    return found


def float_poses(model, pixels: Sequence[np.ndarray]) -> List[Poses]:
    """The float Keras model's poses on contract pixels [S, S, 3] at its input size, decoded by the device's decoding."""
    from edge.answers.heads import keypoints as pose_decode

    found = []
    for image in pixels:
        out = model(tf.cast(image[None], tf.float32), training=False)
        layout = pose_decode.float_layout(image.shape[0], image.shape[1], int(out["keypoints"].shape[-1]) // 3)
        boxes, classes, scores, points = pose_decode.decode(
            out["box_dist"][0].numpy(), out["class_logits"][0].numpy(), out["keypoints"][0].numpy(), layout)
        points[..., :2] = np.clip(points[..., :2], 0.0, 1.0)
        found.append(Poses(np.clip(boxes, 0.0, 1.0), classes.astype(np.int32), scores, points))
    return found
