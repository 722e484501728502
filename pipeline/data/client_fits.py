"""Training over the ways client programs fit a picture to the model's input, in pure TensorFlow.

    image = fit_to_size(decoded, image_size, choice)      # uint8 [S, S, 3], static shape, TPU host safe
    choice = fit_choice(seed, position)                   # which fit an example gets (drawn once, stateless)

The pixel contract stretches with an antialiased bilinear filter; pycoral's classify_image.py stretches with
LANCZOS, MediaPipe with a bilinear that is neither antialiased nor centred on pixel centres, OpenCV-based
programs with a centred bilinear without antialiasing, others keep the aspect ratio (a centre crop, or black
bars). A model trained on the contract alone can lose points in those programs; one trained on a mixture of
them sees each. The classification clients all stretch, so the aspect-keeping fits (crop, letterbox: how
detectors are fed) get no share: with them, the photo bench lost 6.4 points on the contract, without them 3.8.
Each example gets one fit, drawn from the seed and its position (stateless, so the decoded
cache after the first epoch holds and a resumed run draws the same), the contract's own most often.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import tensorflow as tf

# name -> share of the training examples fitted that way
FITS: Dict[str, float] = {
    "contract": 0.35,  # bilinear, antialiased, half-pixel centres: edgeflow and training without this option
    "bilinear": 0.15,  # bilinear, not antialiased, half-pixel centres (OpenCV INTER_LINEAR)
    "corner_bilinear": 0.20,  # bilinear, not antialiased, x_out * in / out (MediaPipe's warp)
    "lanczos": 0.20,  # LANCZOS-3, antialiased (pycoral's Pillow resize)
    "area": 0.10,  # pixel area averaging (OpenCV INTER_AREA, TF's area)
    "crop": 0.0,  # (no share, see above) the centred square of the shorter side, then the contract's filter
    "letterbox": 0.0,  # (no share) the whole picture, aspect kept, centred on black, the contract's filter
}


def fit_choice(seed: int, position: tf.Tensor) -> tf.Tensor:
    """The index (into FITS) of the fit an example at `position` gets, drawn from `seed` alone."""
    draw = tf.random.stateless_uniform([], seed=tf.stack([tf.cast(seed, tf.int64), tf.cast(position, tf.int64)]))
    edges = tf.constant(list(_cumulative()), tf.float32)
    return tf.minimum(tf.reduce_sum(tf.cast(draw >= edges, tf.int32)), len(FITS) - 1)


def _cumulative():
    total = 0.0
    for share in list(FITS.values())[:-1]:
        total += share
        yield total


def fit_to_size(image: tf.Tensor, image_size: int, choice: tf.Tensor) -> tf.Tensor:
    """`image` (uint8 [h, w, 3], any size) fitted to a static uint8 [S, S, 3] by fit number `choice`."""
    image = tf.cast(image, tf.float32)
    size = [image_size, image_size]

    def stretch(method: str, antialias: bool) -> Callable[[], tf.Tensor]:
        return lambda: tf.image.resize(image, size, method=method, antialias=antialias)

    def corner_bilinear() -> tf.Tensor:
        # TF1's resize without half-pixel centres samples source x_out * in / out, as MediaPipe's warp does.
        return tf.compat.v1.image.resize_bilinear(image[tf.newaxis], size, align_corners=False, half_pixel_centers=False)[0]

    def crop() -> tf.Tensor:
        shape = tf.shape(image)
        side = tf.minimum(shape[0], shape[1])
        square = tf.image.crop_to_bounding_box(image, (shape[0] - side) // 2, (shape[1] - side) // 2, side, side)
        return tf.image.resize(square, size, method="bilinear", antialias=True)

    def letterbox() -> tf.Tensor:
        return tf.image.resize_with_pad(image, image_size, image_size, method="bilinear", antialias=True)

    branches: Tuple[Callable[[], tf.Tensor], ...] = (
        stretch("bilinear", True), stretch("bilinear", False), corner_bilinear, stretch("lanczos3", True),
        stretch("area", False), crop, letterbox)
    assert len(branches) == len(FITS)
    fitted = tf.switch_case(tf.cast(choice, tf.int32), [lambda b=b: tf.ensure_shape(b(), [image_size, image_size, 3])
                                                        for b in branches])
    fitted = tf.cast(tf.clip_by_value(tf.round(fitted), 0, 255), tf.uint8)
    return tf.ensure_shape(fitted, [image_size, image_size, 3])
