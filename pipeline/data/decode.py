"""Decoding and resizing as the pixel contract (edge/preprocess.py) says, in pure TensorFlow, so the
input pipeline still runs on a TPU host: JPEG with the accurate integer DCT at the contract's reduced
scale, bilinear resize with antialiasing. What remains different is measured in bench/results/pixel_contract.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from edge.errors import InputError
from edge.preprocess import load_image
from pipeline.errors import DataError


def _to_size(image, image_size: int):
    """Stretch to a static [S, S, 3] by the pixel contract: bilinear with antialiasing, rounded to uint8."""
    image = tf.image.resize(image, [image_size, image_size], method="bilinear", antialias=True)
    image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
    return tf.ensure_shape(image, [image_size, image_size, 3])


def _decode_pixels(raw, image_size):
    return _to_size(raw, image_size)


def _decode_encoded(raw, image_size):
    # Pixel contract v2: JPEG through the accurate integer DCT (TensorFlow's default is the fast one), at the
    # largest scale 1/k (k = 8, 4, 2, 1) with k <= height // size and k <= width // size: libjpeg's scaled
    # IDCT, as Pillow's draft decodes it on the device.
    def jpeg(ratio):
        return lambda: tf.io.decode_jpeg(raw, channels=3, dct_method="INTEGER_ACCURATE", ratio=ratio)

    def scaled_jpeg():
        shape = tf.io.extract_jpeg_shape(raw)  # [height, width, channels]
        k = tf.minimum(shape[0] // image_size, shape[1] // image_size)
        branch = tf.cast(k >= 2, tf.int32) + tf.cast(k >= 4, tf.int32) + tf.cast(k >= 8, tf.int32)
        return tf.switch_case(branch, [jpeg(1), jpeg(2), jpeg(4), jpeg(8)])  # `ratio` must be a Python int

    image = tf.cond(tf.io.is_jpeg(raw), scaled_jpeg,
                    lambda: tf.io.decode_image(raw, channels=3, expand_animations=False))
    return _to_size(image, image_size)


def training_pixels(raw: Any, image_size: int) -> np.ndarray:
    """One example as training's input pipeline turns it into pixels (encoded bytes, or uint8 pixels);
    for measuring it against the pixel contract."""
    decode = _decode_pixels if isinstance(raw, np.ndarray) else _decode_encoded
    return decode(tf.constant(raw), image_size).numpy()


DECODERS = {"digits": _decode_pixels, "tfrecord": _decode_encoded, "folder": _decode_encoded}


def check_image(data: bytes, where: str) -> None:
    """The pixel contract's own check (edge.preprocess): what the device would refuse, training refuses too."""
    try:
        load_image(data, where)
    except InputError as err:
        raise DataError(str(err)) from err
