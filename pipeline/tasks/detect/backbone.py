"""The detector's backbones, which every head stands on: raw pixels in (Rescaling to [-1, 1] first, as every registry
model takes them), the feature maps at the strides a head asks for out.

    features = levels(inputs, "small_cnn", strides=(8, 16, 32))   # one feature map per stride, in that order

Every op is a convolution, BatchNorm, ReLU or max pooling: ops the Edge TPU maps. Uncompiled, no strategy, no files.
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import tf_keras as keras

from models import registry

BACKBONES = ("small_cnn", "mobilenet_v2")
# MobileNetV2's layer whose output has each stride (Keras' layer names, any alpha).
_MOBILENET_V2_LEVELS: Dict[int, str] = {8: "block_6_expand_relu", 16: "block_13_expand_relu", 32: "out_relu"}


def check(backbone: str, image_size: int, strides: Sequence[int], what: str = "the feature stride") -> None:
    """Refuse a backbone without levels, or an input the `strides` do not divide."""
    if backbone not in BACKBONES:
        raise ValueError(f"detector backbone {backbone!r}; expected one of {', '.join(BACKBONES)}")
    for stride in strides:
        if image_size % stride:
            raise ValueError(f"image size {image_size} is not a multiple of {what} {stride}")


def levels(inputs, backbone: str, strides: Sequence[int], imagenet: bool = False, **options) -> Tuple:
    """The feature maps of `backbone` at `strides` over raw pixel `inputs` (its preprocessing first)."""
    pixels = registry.preprocess(inputs)
    if backbone == "small_cnn":
        return _small_cnn_levels(pixels, strides, **options)
    return _mobilenet_v2_levels(pixels, strides, imagenet, **options)


def conv(x, filters: int, name: str, stride: int = 1):
    """A 3x3 convolution, BatchNorm and ReLU: the backbone's block, and the heads' towers."""
    x = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, name=name)(x)
    x = keras.layers.BatchNormalization(name=f"{name}_bn")(x)
    return keras.layers.ReLU(name=f"{name}_relu")(x)


def _small_cnn_levels(x, strides: Sequence[int], width: int = 16) -> Tuple:
    """The registry's small CNN (3x3 convolutions and separate max pooling), deepened to stride 32 with
    BatchNorm, its channels doubling per halving up to 8 x width; the levels at `strides` are kept."""
    kept = {}
    stride, filters = 1, width
    x = conv(x, filters, "conv0")
    while stride < max(strides):
        x = keras.layers.MaxPooling2D(2, name=f"pool{stride * 2}")(x)
        stride *= 2
        filters = min(filters * 2, width * 8)
        x = conv(x, filters, f"conv{stride}")
        if stride >= 8:
            x = conv(x, filters, f"conv{stride}b")
        kept[stride] = x
    return tuple(kept[s] for s in strides)


def _mobilenet_v2_levels(x, strides: Sequence[int], imagenet: bool, alpha: float = 1.0) -> Tuple:
    unknown = [s for s in strides if s not in _MOBILENET_V2_LEVELS]
    if unknown:
        raise ValueError(f"MobileNetV2 has no feature level at stride {unknown[0]}; expected strides among {sorted(_MOBILENET_V2_LEVELS)}")
    base = keras.applications.MobileNetV2(input_shape=tuple(x.shape[1:]), alpha=alpha, include_top=False,
                                          weights=registry.keras_weights(imagenet))
    extractor = keras.Model(base.input, [base.get_layer(_MOBILENET_V2_LEVELS[s]).output for s in strides], name="backbone")
    out = extractor(x)
    return tuple(out) if isinstance(out, list) else (out,)
