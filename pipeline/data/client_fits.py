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

A fit reproduces its client's whole feed from the file: the client's decode (every client decodes a JPEG at full
size; only the contract's fit decodes at 1/k, pipeline/data/decode.py), its resize and its rounding. Measured on the
photo crops (bench/results/clients.md, bench/clients/fit_pixels.py): MediaPipe's and OpenCV's fits equal the
clients' tensors byte for byte from the same decoded pixels, pycoral's equals Pillow 11.3's LANCZOS (the device's)
byte for byte; before the full-size decode the MediaPipe fit was off by 10 grey levels on average at 32 px.
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
    "corner_bilinear": 0.20,  # bilinear, not antialiased, x_out * in / out in fixed point (MediaPipe's warp, exactly)
    "lanczos": 0.20,  # LANCZOS-3, antialiased, in Pillow's fixed point (pycoral's Pillow resize)
    "area": 0.10,  # pixel area averaging (OpenCV INTER_AREA, TF's area)
    "crop": 0.0,  # (no share, see above) the centred square of the shorter side, then the contract's filter
    "letterbox": 0.0,  # (no share) the whole picture, aspect kept, centred on black, the contract's filter
}

CONTRACT_FIT = list(FITS).index("contract")  # the one fit whose JPEG is decoded as the contract decodes it (at 1/k);
# every other fit's client decodes the whole file at full size (pipeline/data/decode.py)

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
    2 points without them. Measured again with fits that are each client's whole feed (full-size decode, its own
    rounding): 7.6 points at 32x32 and 3.8 at 96x96, every client within 2 points without them
    (bench/results/clients.md)."""
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
        return _mediapipe_warp(image, image_size)

    def crop() -> tf.Tensor:
        shape = tf.shape(image)
        side = tf.minimum(shape[0], shape[1])
        square = tf.image.crop_to_bounding_box(image, (shape[0] - side) // 2, (shape[1] - side) // 2, side, side)
        return tf.image.resize(square, size, method="bilinear", antialias=True)

    def letterbox() -> tf.Tensor:
        return tf.image.resize_with_pad(image, image_size, image_size, method="bilinear", antialias=True)

    branches: Tuple[Callable[[], tf.Tensor], ...] = (
        stretch("bilinear", True), stretch("bilinear", False), corner_bilinear, lambda: _pillow_lanczos(image, image_size),
        stretch("area", False), crop, letterbox)
    assert len(branches) == len(FITS)
    fitted = tf.switch_case(tf.cast(choice, tf.int32), [lambda b=b: tf.ensure_shape(b(), [image_size, image_size, 3])
                                                        for b in branches])
    fitted = tf.cast(tf.clip_by_value(tf.round(fitted), 0, 255), tf.uint8)
    return tf.ensure_shape(fitted, [image_size, image_size, 3])


_INTER_BITS, _COEF_BITS = 5, 15  # OpenCV's warp, as MediaPipe runs it: coordinates in 1/32 pixel, weights in 1/32768


def _mediapipe_warp(image: tf.Tensor, image_size: int) -> tf.Tensor:
    """MediaPipe's stretch of the whole picture (edge.clients.feeds._warp_bilinear), integer for integer: output pixel x
    samples source x * in / out rounded to 1/32 pixel, bilinear with each weight rounded to 1/32768, no
    antialiasing, the border replicated."""
    def axis(n_in: tf.Tensor):
        fixed = tf.cast(tf.round(tf.range(image_size, dtype=tf.float64) * (tf.cast(n_in, tf.float64) / image_size)
                                 * (1 << _INTER_BITS)), tf.int64)
        low = tf.bitwise.right_shift(fixed, _INTER_BITS)
        frac = tf.cast(tf.bitwise.bitwise_and(fixed, (1 << _INTER_BITS) - 1), tf.float64) / (1 << _INTER_BITS)
        last = tf.cast(n_in, tf.int64) - 1
        return tf.clip_by_value(low, 0, last), tf.clip_by_value(low + 1, 0, last), frac

    shape = tf.shape(image, out_type=tf.int64)
    y0, y1, fy = axis(shape[0])
    x0, x1, fx = axis(shape[1])
    wx, wy = fx[tf.newaxis, :], fy[:, tf.newaxis]
    scale = float(1 << _COEF_BITS)

    def weight(w):  # [S, S, 1] int64: the 1D products are exact, each rounded as OpenCV's table is
        return tf.cast(tf.round(w * scale), tf.int64)[..., tf.newaxis]

    src = tf.cast(image, tf.int64)
    rows0, rows1 = tf.gather(src, y0), tf.gather(src, y1)
    total = (tf.gather(rows0, x0, axis=1) * weight((1 - wy) * (1 - wx)) + tf.gather(rows0, x1, axis=1) * weight((1 - wy) * wx)
             + tf.gather(rows1, x0, axis=1) * weight(wy * (1 - wx)) + tf.gather(rows1, x1, axis=1) * weight(wy * wx))
    return tf.cast(tf.bitwise.right_shift(total + (1 << (_COEF_BITS - 1)), _COEF_BITS), tf.float32)


_PILLOW_BITS = 22  # Pillow's resample: coefficients in 1/2**22, bytes again after each pass


def _pillow_lanczos(image: tf.Tensor, image_size: int) -> tf.Tensor:
    """Pillow's Image.resize(size, LANCZOS) of 8-bit RGB, as its resample code computes it: per axis, each output
    pixel's taps within 3 * max(scale, 1) of its centre, LANCZOS-3 weights normalised to sum 1 and rounded to
    1/2**22; the horizontal pass first, rounded and clipped to bytes, then the vertical pass."""
    def coefficients(n_in: tf.Tensor) -> tf.Tensor:  # [S, n_in] float64 of whole numbers (the fixed-point weights)
        n = tf.cast(n_in, tf.float64)
        scale = n / image_size
        filterscale = tf.maximum(scale, 1.0)
        support = 3.0 * filterscale
        centre = (tf.range(image_size, dtype=tf.float64) + 0.5) * scale
        first = tf.maximum(tf.math.floor(centre - support + 0.5), 0.0)[:, tf.newaxis]  # C's (int) of a value >= 0 here
        end = tf.minimum(tf.math.floor(centre + support + 0.5), n)[:, tf.newaxis]
        source = tf.range(n_in, dtype=tf.float64)[tf.newaxis, :]
        x = (source - centre[:, tf.newaxis] + 0.5) * (1.0 / filterscale)  # as Pillow: times the reciprocal

        def sinc(v):
            safe = tf.where(v == 0.0, tf.ones_like(v), v) * np.pi
            return tf.where(v == 0.0, tf.ones_like(v), tf.sin(safe) / safe)

        weights = tf.where((source >= first) & (source < end) & (x >= -3.0) & (x < 3.0), sinc(x) * sinc(x / 3.0), 0.0)
        total = tf.reduce_sum(weights, axis=1, keepdims=True)
        weights = tf.where(total != 0.0, weights / tf.where(total != 0.0, total, 1.0), weights)
        fixed = weights * (1 << _PILLOW_BITS)
        return tf.where(fixed < 0.0, tf.math.ceil(fixed - 0.5), tf.math.floor(fixed + 0.5))  # (int)(±0.5 + k), C's truncation

    def to_bytes(total: tf.Tensor) -> tf.Tensor:  # (sum + 2**21) >> 22, clipped to 0..255 (exact in float64)
        return tf.clip_by_value(tf.math.floor((total + (1 << (_PILLOW_BITS - 1))) / (1 << _PILLOW_BITS)), 0.0, 255.0)

    shape = tf.shape(image)
    pixels = tf.cast(image, tf.float64)
    across, down = coefficients(shape[1]), coefficients(shape[0])

    # The horizontal pass first, as Pillow's resample code reads (and as Pillow 11.3, pycoral's on the device, runs
    # it); Pillow 13 runs the vertical one first for some sizes, which moves a few bytes by up to 10 levels.
    across_first = to_bytes(tf.einsum("hwc,xw->hxc", pixels, across))
    return tf.cast(to_bytes(tf.einsum("hxc,yh->yxc", across_first, down)), tf.float32)
