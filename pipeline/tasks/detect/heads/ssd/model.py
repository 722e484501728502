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
from typing import Dict, Sequence, Tuple

import tf_keras as keras

from models import registry

BACKBONES = ("small_cnn", "mobilenet_v2")
# MobileNetV2's layer whose output has each stride (Keras' layer names, any alpha).
_MOBILENET_V2_LEVELS: Dict[int, str] = {8: "block_6_expand_relu", 16: "block_13_expand_relu", 32: "out_relu"}
PRIOR = 0.01  # initial object probability of every anchor: keeps the focal loss stable at the start


def build_detector(backbone: str, image_size: int, num_classes: int, anchors_per_location: int,
                   strides: Sequence[int] = (8, 16), head_width: int = 64, imagenet: bool = False,
                   **options) -> keras.Model:
    """Outputs {"box_codes": [B, A, 4], "class_logits": [B, A, num_classes + 1]}, float32."""
    if backbone not in BACKBONES:
        raise ValueError(f"detector backbone {backbone!r}; expected one of {', '.join(BACKBONES)}")
    for stride in strides:
        if image_size % stride:
            raise ValueError(f"image size {image_size} is not a multiple of the feature stride {stride}")
    inputs = keras.Input((image_size, image_size, 3), name="image")
    pixels = registry.preprocess(inputs)
    if backbone == "small_cnn":
        features = _small_cnn_levels(pixels, strides, **options)
    else:
        features = _mobilenet_v2_levels(pixels, strides, imagenet, **options)
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


def _conv(x, filters: int, name: str, stride: int = 1):
    x = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=name)(x)
    x = keras.layers.BatchNormalization(name=f"{name}_bn")(x)
    return keras.layers.ReLU(name=f"{name}_relu")(x)


def _small_cnn_levels(x, strides: Sequence[int], width: int = 16) -> Tuple:
    """The registry's small CNN (3x3 convolutions and separate max pooling), deepened to stride 32 with
    BatchNorm, its channels doubling per halving up to 8 x width; the levels at `strides` are kept."""
    levels = {}
    stride, filters = 1, width
    x = _conv(x, filters, "conv0")
    while stride < max(strides):
        x = keras.layers.MaxPooling2D(2, name=f"pool{stride * 2}")(x)
        stride *= 2
        filters = min(filters * 2, width * 8)
        x = _conv(x, filters, f"conv{stride}")
        if stride >= 8:
            x = _conv(x, filters, f"conv{stride}b")
        levels[stride] = x
    return tuple(levels[s] for s in strides)


def _mobilenet_v2_levels(x, strides: Sequence[int], imagenet: bool, alpha: float = 1.0) -> Tuple:
    unknown = [s for s in strides if s not in _MOBILENET_V2_LEVELS]
    if unknown:
        raise ValueError(f"MobileNetV2 has no feature level at stride {unknown[0]}; expected strides among {sorted(_MOBILENET_V2_LEVELS)}")
    base = keras.applications.MobileNetV2(input_shape=tuple(x.shape[1:]), alpha=alpha, include_top=False,
                                          weights=registry.keras_weights(imagenet))
    extractor = keras.Model(base.input, [base.get_layer(_MOBILENET_V2_LEVELS[s]).output for s in strides], name="backbone")
    out = extractor(x)
    return tuple(out) if isinstance(out, list) else (out,)


def _head(feature, stride: int, image_size: int, num_classes: int, k: int, width: int):
    grid = image_size // stride
    tower = _conv(feature, width, f"head{stride}")
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
