"""A single-shot detector (SSD's shape) for the Edge TPU: a backbone from the registry's families, one or
more feature levels, and a convolutional box/class head per level.

Like the classifiers it takes raw pixels (Rescaling to [-1, 1] inside). It outputs, per anchor in
`pipeline.tasks.detect.heads.ssd.anchors` order, box codes [B, A, 4] (the center-size coder's ty, tx, th, tw) and class
logits [B, A, C + 1] with column 0 the background, the two inputs TFLite's detection post-processing
takes (after a sigmoid: `with_scores`). Every op is a convolution, a reshape, a concatenation or, in
`with_scores`, a logistic: ops the Edge TPU maps. Uncompiled, no strategy, no files.
"""
from __future__ import annotations

import math
from typing import Sequence

import tf_keras as keras

from pipeline.tasks.detect import backbone as backbones
from pipeline.tasks.detect.backbone import conv

PRIOR = 0.01  # initial object probability of every anchor: keeps the focal loss stable at the start


def build_detector(backbone: str, image_size: int, num_classes: int, anchors_per_location: int,
                   strides: Sequence[int] = (8, 16), head_width: int = 64, imagenet: bool = False,
                   **options) -> keras.Model:
    """Outputs {"box_codes": [B, A, 4], "class_logits": [B, A, num_classes + 1]}, float32."""
    backbones.check(backbone, image_size, strides)
    inputs = keras.Input((image_size, image_size, 3), name="image")
    features = backbones.levels(inputs, backbone, strides, imagenet, **options)
    boxes, logits = [], []
    for stride, feature in zip(strides, features):
        b, c = _head(feature, stride, image_size, num_classes, anchors_per_location, head_width)
        boxes.append(b)
        logits.append(c)
    box_codes = _joined(boxes, "box_codes")
    class_logits = _joined(logits, "class_logits")
    return keras.Model(inputs, {"box_codes": box_codes, "class_logits": class_logits}, name=f"ssd_{backbone}")


def with_scores(detector: keras.Model) -> keras.Model:
    """The detector with sigmoid scores in place of logits: what the post-processing op is fed."""
    outputs = detector.outputs if isinstance(detector.output, list) else list(detector.output.values())
    named = dict(zip(detector.output_names, outputs))
    scores = keras.layers.Activation("sigmoid", dtype="float32", name="class_scores")(named["class_logits"])
    return keras.Model(detector.input, {"box_codes": named["box_codes"], "class_scores": scores}, name=detector.name + "_scores")


def _head(feature, stride: int, image_size: int, num_classes: int, k: int, width: int):
    grid = image_size // stride
    tower = conv(feature, width, f"head{stride}")
    box = keras.layers.Conv2D(k * 4, 3, padding="same", name=f"box{stride}")(tower)
    bias = -math.log((1 - PRIOR) / PRIOR)
    cls = keras.layers.Conv2D(k * (num_classes + 1), 3, padding="same", name=f"class{stride}",
                              bias_initializer=keras.initializers.Constant(bias))(tower)
    box = keras.layers.Reshape((grid * grid * k, 4), name=f"box{stride}_flat")(box)
    cls = keras.layers.Reshape((grid * grid * k, num_classes + 1), name=f"class{stride}_flat")(cls)
    return box, cls


def _joined(parts, name: str):
    if len(parts) == 1:
        return keras.layers.Activation("linear", dtype="float32", name=name)(parts[0])
    joined = keras.layers.Concatenate(axis=1, name=f"{name}_concat")(parts)
    # float32 under mixed precision, as the classifiers' scores are.
    return keras.layers.Activation("linear", dtype="float32", name=name)(joined)
