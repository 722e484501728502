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

import io
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import numpy as np
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


SIZE_SAMPLE = 64  # training images whose sizes decide `auto` (their headers only are read)


class Decision(NamedTuple):
    """Whether training fits images as the clients do, and why (recorded with the run's feed)."""

    on: bool
    why: str

    def record(self) -> Dict[str, object]:
        return {"on": self.on, "why": self.why}


def decide(asked: Optional[bool], source, indices: np.ndarray, image_size: int) -> Decision:
    """--client-fits / --no-client-fits as asked; by default on when most training images are enlarged to the
    input, off when they are shrunk. Enlarging, the clients' resizes differ only in how they interpolate, and
    training over them costs nothing measurable on the contract (digits, 8x8 to 32x32: 0.961 either way)
    while MediaPipe's answers climb from 0.904 to 0.958; shrinking, they differ in antialiasing too, the
    fits cost 3.8 points on the contract (photos, 160-420 px to 48x48), and every client was already within
    2 points without them."""
    if asked is not None:
        return Decision(asked, "--client-fits" if asked else "--no-client-fits")
    sample = np.sort(np.random.default_rng(0).permutation(indices)[:SIZE_SAMPLE])
    enlarged = sum(max(_size(item)) <= image_size for item in source.originals(sample))
    if 2 * enlarged > len(sample):
        return Decision(True, f"default: {enlarged} of {len(sample)} sampled training images are enlarged to the "
                              f"{image_size}x{image_size} input, where fitting as the clients do costs no accuracy")
    return Decision(False, f"default: {len(sample) - enlarged} of {len(sample)} sampled training images are shrunk to "
                           f"the {image_size}x{image_size} input, where fitting as the clients do costs accuracy")


def _size(item) -> Tuple[int, int]:
    """(height, width) of an example as stored: pixels, or an encoded image whose header is all that is read."""
    if isinstance(item, np.ndarray):
        return tuple(item.shape[:2])
    from PIL import Image

    with Image.open(io.BytesIO(item)) as image:
        return image.height, image.width


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
