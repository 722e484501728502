"""An imported Ultralytics pose model behind edgeflow's pixel contract and in the YOLO pose head's layout: a SavedModel
whose input is raw RGB pixels 0..255 [1, S, S, 3] and whose outputs are box distributions (1, N, 64), class logits
(1, N, C) and keypoints (1, N, 3K), as pipeline/tasks/pose/heads/yolo/model.py's model gives them.

The converted graph (onnx2tf, NHWC) ends at the cut: per stride a (1, S/s, S/s, 64), a (1, S/s, S/s, C) and a
(1, S/s, S/s, 3K) map, told apart by shape, reshaped to (1, cells, channels) and the levels concatenated, as the
imported detector's (pipeline/tasks/detect/heads/yolo/import_wrap.py). Ultralytics' raw keypoint channels (r_x, r_y, r_v
per keypoint, the same order as edgeflow's) decode as x = (2 r_x + i) * stride for the cell i, whose centre edgeflow's
decoding adds: so the offset in strides from the centre is dx = 2 r_x - 0.5 (dy alike), and the visibility logit is r_v
itself. That affine map is one multiply and one add by constant vectors. The result is clipped to (-16, 16), the pose
head's bound, instead of the head's 16 tanh(x / 16): the clip leaves every offset inside the bound exact (tanh would
bend the ones the model was never trained to bend), and the int8 export pins the same grid; an offset beyond 16 strides
(over 128 px at stride 8) is cut to 16. The manifest records it (pose.keypoint_bound).

    write(converted_saved_model, contract, folder, num_classes, num_keypoints)
    model = load(folder)        # model(image, training=False) -> {"box_dist", "class_logits", "keypoints"}
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from pipeline.tasks.detect.heads.yolo import import_wrap as detector
from pipeline.tasks.detect.heads.yolo.onnx_tail import STRIDES
from pipeline.tasks.pose.heads.yolo.model import KEYPOINT_LIMIT

BOUND = (f"clipped to (-{KEYPOINT_LIMIT:g}, {KEYPOINT_LIMIT:g}) in the graph (an imported model's raw keypoints r mapped "
         "to offsets 2 r - 0.5 strides from the anchor centre and visibility logits r; no tanh)")


def keypoint_map(num_keypoints: int):
    """(scale, shift) [3K]: Ultralytics' raw keypoint channels times scale plus shift are edgeflow's (dx, dy, v)."""
    return (np.tile(np.array([2.0, 2.0, 1.0], np.float32), num_keypoints),
            np.tile(np.array([-0.5, -0.5, 0.0], np.float32), num_keypoints))


def write(source: Path, contract, folder: Path, num_classes: int, num_keypoints: int) -> None:
    detector.write(source, contract, folder, num_classes, functools.partial(_keypoints, num_keypoints),
                   name="imported_yolo_pose")


def _keypoints(num_keypoints: int, fn, size: int):
    """The keypoint output of the converted graph `fn`'s outputs: each level's raw map reshaped to (1, cells, 3K), the
    levels concatenated, mapped to edgeflow's offsets and clipped to the head's bound."""
    import tensorflow as tf

    channels = 3 * num_keypoints
    points = _keypoint_levels(fn, size, channels)
    scale, shift = (tf.constant(a) for a in keypoint_map(num_keypoints))

    def outputs(out) -> dict:
        raw = tf.concat([tf.reshape(out[points[s]], [1, -1, channels]) for s in STRIDES], axis=1)
        return {"keypoints": tf.clip_by_value(raw * scale + shift, -KEYPOINT_LIMIT, KEYPOINT_LIMIT)}

    return outputs


def _keypoint_levels(fn, size: int, channels: int) -> dict:
    """stride -> the keypoint map's output name, by its NHWC shape."""
    found = detector.maps_by_shape(fn, size, (channels,), lambda shapes, grid, stride: (
        f"the converted pose model's outputs are {shapes}; expected one [1, {grid}, {grid}, {channels}] keypoint map "
        f"at stride {stride}"))
    return {stride: names[0] for stride, names in found.items()}


def load(folder: Path):
    """The run's wrapped pose model as the pose export calls one: model(image, training=False) -> its three outputs, and
    its output_shape by name (the detector's wrapper, detect/heads/yolo/import_wrap.py)."""
    return detector.load(folder, name="imported_yolo_pose")
