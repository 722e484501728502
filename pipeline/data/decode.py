"""Decoding and resizing as the pixel contract (edge/pixels/preprocess.py) says, in pure TensorFlow, so the
input pipeline still runs on a TPU host: JPEG with the accurate integer DCT at the scale the contract's
version asks for, bilinear resize with antialiasing. What remains different is measured in
bench/results/pixel_contract.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from edge.pixels.contract import PixelContract
from edge.errors import InputError
from edge.pixels.preprocess import load_image
from pipeline.data.client_fits import CONTRACT_FIT, fit_to_size
from pipeline.errors import DataError

# What training decodes by, and what train records in the manifest for every later stage and the device:
# the newest contract version, raw pixels (the models normalize inside).
TRAINING_CONTRACT = PixelContract()


def _to_size(image, image_size: int, fit=None):
    """Stretch to a static [S, S, 3] by the pixel contract: bilinear with antialiasing, rounded to uint8; or, given
    `fit` (an index into client_fits.FITS), the way that client fit would."""
    if fit is not None:
        return fit_to_size(image, image_size, fit)
    image = tf.image.resize(image, [image_size, image_size], method="bilinear", antialias=True)
    image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
    return tf.ensure_shape(image, [image_size, image_size, 3])


def _decode_pixels(raw, image_size, contract: PixelContract = TRAINING_CONTRACT, fit=None):
    return _to_size(raw, image_size, fit)


def _decode_encoded(raw, image_size, contract: PixelContract = TRAINING_CONTRACT, fit=None):
    # JPEG through the accurate integer DCT (TensorFlow's default is the fast one); from contract version 2 at the
    # largest scale 1/k (k = 8, 4, 2, 1) with k <= height // size and k <= width // size: libjpeg's scaled
    # IDCT, as Pillow's draft decodes it on the device. Version 1 decodes at full size.
    def jpeg(ratio):
        return lambda: tf.io.decode_jpeg(raw, channels=3, dct_method="INTEGER_ACCURATE", ratio=ratio)

    def scaled_jpeg():
        shape = tf.io.extract_jpeg_shape(raw)  # [height, width, channels]
        k = tf.minimum(shape[0] // image_size, shape[1] // image_size)
        branch = tf.cast(k >= 2, tf.int32) + tf.cast(k >= 4, tf.int32) + tf.cast(k >= 8, tf.int32)
        return tf.switch_case(branch, [jpeg(1), jpeg(2), jpeg(4), jpeg(8)])  # `ratio` must be a Python int

    decode_jpeg = scaled_jpeg if contract.scaled else jpeg(1)
    if fit is not None and contract.scaled:
        # A client's fit starts from the client's own decode: every client decodes the whole JPEG at full size
        # (only the contract decodes at 1/k), and at 1/k a fit without antialiasing samples averaged blocks
        # instead of the full-size pixels the client samples (bench/results/clients.md, the fits' pixels).
        decode_jpeg = lambda: tf.cond(tf.equal(tf.cast(fit, tf.int32), CONTRACT_FIT), scaled_jpeg, jpeg(1))  # noqa: E731
    image = tf.cond(tf.io.is_jpeg(raw), decode_jpeg, lambda: tf.io.decode_image(raw, channels=3, expand_animations=False))
    return _to_size(image, image_size, fit)


def training_pixels(raw: Any, image_size: int, contract: PixelContract = TRAINING_CONTRACT) -> np.ndarray:
    """One example as training's input pipeline turns it into pixels (encoded bytes, or uint8 pixels) by
    `contract`'s version; for measuring it against the pixel contract."""
    if isinstance(raw, np.ndarray):
        return _decode_pixels(tf.constant(raw), image_size).numpy()
    return _decode_encoded(tf.constant(raw), image_size, contract).numpy()


DECODERS = {"digits": _decode_pixels, "tfrecord": _decode_encoded, "folder": _decode_encoded}


def check_image(data: bytes, where: str) -> None:
    """The pixel contract's own check (edge.pixels.preprocess): what the device would refuse, training refuses too."""
    try:
        # A JPEG at its smallest DCT scale (1/8): every byte of it is still read and entropy-decoded, so a
        # truncated or unreadable file fails as it does at full size, at about 40% of the CPU.
        load_image(data, where, size=(1, 1))
    except InputError as err:
        raise DataError(str(err)) from err
