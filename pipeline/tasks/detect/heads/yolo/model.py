"""An anchor-free detection head of the YOLOv8 family for the Edge TPU, on the SSD detector's backbones.

    detector = build_yolo_detector("small_cnn", 128, num_classes=3)
    out = detector(images)   # {"box_dist": [B, N, 64], "class_logits": [B, N, C]}

N is the number of anchor points: one per cell of the feature maps at strides 8, 16 and 32, at the cell's centre,
level by level and row-major within a level (2,100 at 320x320). Per point, `box_dist` holds the logits of four
16-bin distributions (DFL), side-major: left, top, right, bottom, each the distance from the anchor point to that
side of the box in units of the level's stride (the expected bin). `class_logits` are per-class logits (a sigmoid
each, no background column), bounded softly to (-4, 4) inside the graph by 4 * tanh(x / 4): an int8 output then
spends its 256 levels on the scores a client can tell apart (sigmoid(4) = 0.982), and the gradient never dies as
a hard clip's would. This is the layout Frigate's `yolo-generic` reader takes (docs/yolo.md).

Every op is a convolution, ReLU, reshape, concatenation, multiplication or tanh: ops the Edge TPU maps. The model
takes raw pixels (Rescaling to [-1, 1] first), as every registry model does. Uncompiled, no strategy, no files.
"""
from __future__ import annotations

import math
from typing import Sequence, Tuple

import numpy as np
import tf_keras as keras

from models import registry
from pipeline.tasks.detect.heads.ssd.model import BACKBONES, _conv, _mobilenet_v2_levels, _small_cnn_levels

STRIDES = (8, 16, 32)
REG_MAX = 16  # bins per side: distances 0..15 strides
LOGIT_LIMIT = 4.0  # class logits lie in (-4, 4)
OUTPUTS = ("box_dist", "class_logits")
START_LOGIT = -3.5  # every class logit at the start


def anchor_points(image_size: int, strides: Sequence[int] = STRIDES) -> Tuple[np.ndarray, np.ndarray]:
    """(centres [N, 2] as (x, y) in input pixels, strides [N]) in the head's output order."""
    centres, steps = [], []
    for stride in strides:
        grid = image_size // stride
        ys, xs = np.meshgrid(np.arange(grid, dtype=np.float32), np.arange(grid, dtype=np.float32), indexing="ij")
        centres.append((np.stack([xs.ravel(), ys.ravel()], axis=1) + 0.5) * stride)
        steps.append(np.full(grid * grid, stride, np.float32))
    return np.concatenate(centres).astype(np.float32), np.concatenate(steps)


def anchor_count(image_size: int, strides: Sequence[int] = STRIDES) -> int:
    return sum((image_size // s) ** 2 for s in strides)


def build_yolo_detector(backbone: str, image_size: int, num_classes: int, head_width: int = 64, imagenet: bool = False,
                        **options) -> keras.Model:
    """Outputs {"box_dist": [B, N, 4 * REG_MAX], "class_logits": [B, N, num_classes]}, float32."""
    if backbone not in BACKBONES:
        raise ValueError(f"detector backbone {backbone!r}; expected one of {', '.join(BACKBONES)}")
    if image_size % max(STRIDES):
        raise ValueError(f"image size {image_size} is not a multiple of the coarsest feature stride {max(STRIDES)}")
    inputs = keras.Input((image_size, image_size, 3), name="image")
    pixels = registry.preprocess(inputs)
    if backbone == "small_cnn":
        features = _small_cnn_levels(pixels, STRIDES, **options)
    else:
        features = _mobilenet_v2_levels(pixels, STRIDES, imagenet, **options)
    boxes, logits = [], []
    for stride, feature in zip(STRIDES, features):
        b, c = _level_head(feature, stride, image_size, num_classes, head_width)
        boxes.append(b)
        logits.append(c)
    box_dist = keras.layers.Concatenate(axis=1, name="box_dist_concat")(boxes)
    class_logits = keras.layers.Concatenate(axis=1, name="class_logits_concat")(logits)
    # Soft bound (-4, 4): tanh keeps a gradient for every logit, where a hard clip would stop the ones beyond it.
    class_logits = keras.layers.Rescaling(1.0 / LOGIT_LIMIT, name="class_logits_in")(class_logits)
    class_logits = keras.layers.Activation("tanh", name="class_logits_tanh")(class_logits)
    class_logits = keras.layers.Rescaling(LOGIT_LIMIT, name="class_logits_bounded")(class_logits)
    # float32 under mixed precision, as the classifiers' scores are.
    box_dist = keras.layers.Activation("linear", dtype="float32", name="box_dist")(box_dist)
    class_logits = keras.layers.Activation("linear", dtype="float32", name="class_logits")(class_logits)
    return keras.Model(inputs, {"box_dist": box_dist, "class_logits": class_logits}, name=f"yolo_{backbone}")


def _level_head(feature, stride: int, image_size: int, num_classes: int, width: int):
    """YOLOv8's decoupled head at one level: a box branch and a class branch, each a 3x3 convolution then a 1x1."""
    grid = image_size // stride
    box = _conv(feature, width, f"yolo_box{stride}_a")
    box = _conv(box, width, f"yolo_box{stride}_b")
    # Bias 1 for every bin: flat distributions at the start, as YOLOv8 starts.
    box = keras.layers.Conv2D(4 * REG_MAX, 1, name=f"yolo_box{stride}",
                              bias_initializer=keras.initializers.Constant(1.0))(box)
    cls = _conv(feature, width, f"yolo_class{stride}_a")
    cls = _conv(cls, width, f"yolo_class{stride}_b")
    # Every score starts low (sigmoid(-3.5) = 0.03) where tanh still passes a quarter of the gradient; the prior
    # SSD starts at (0.01, logit -4.6) lies beyond the bound.
    bias = LOGIT_LIMIT * math.atanh(START_LOGIT / LOGIT_LIMIT)
    cls = keras.layers.Conv2D(num_classes, 1, name=f"yolo_class{stride}",
                              bias_initializer=keras.initializers.Constant(bias))(cls)
    box = keras.layers.Reshape((grid * grid, 4 * REG_MAX), name=f"yolo_box{stride}_flat")(box)
    cls = keras.layers.Reshape((grid * grid, num_classes), name=f"yolo_class{stride}_flat")(cls)
    return box, cls
