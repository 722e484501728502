"""The pixel contract: how an image becomes a model's input tensor, written once.

    from edge.pixels.preprocess import RAW_PIXELS, load_image, resize, to_input
    pixels = resize(load_image("cat.jpg"), (32, 32))          # uint8 [32, 32, 3]
    tensor = to_input(pixels, RAW_PIXELS, interpreter.get_input_details()[0])

The device, the host's parity evaluation and the bundle all go through these functions, so the
pixels a board computes from a camera JPEG are the pixels the parity report measured. Which version
of the steps a model follows, and the contract as manifests and sidecars record it: edge.pixels.contract. Training's
tf.data pipeline (pipeline/data/decode.py) cannot call Pillow on a TPU; it mirrors each step below in
TensorFlow and the remaining difference is measured (bench/training/pixel_contract.py).

The contract, step by step (version 2; version 1 is the same without the JPEG scale):
  decode     Pillow; JPEG through libjpeg's accurate integer DCT (Pillow's default, and
             TensorFlow's `dct_method="INTEGER_ACCURATE"`). EXIF orientation is not applied.
             A JPEG is decoded at the largest scale 1/k (k = 8, 4, 2 or 1) that keeps it at least
             as large as the model's input in both dimensions: k <= width // input width and
             k <= height // input height (libjpeg's scaled IDCT: Pillow's `draft`, TensorFlow's
             `decode_jpeg(ratio=k)`; both give the same decoded pixels, bench/results/edge_speed.md).
             A 640x480 photo for a 224x224 model is decoded at 320x240, in half the time.
  colour     RGB. 8-bit greyscale is repeated into three channels, a palette is expanded, alpha
             is dropped. CMYK, 16-bit and float images are refused: their conversions differ
             between Pillow and TensorFlow.
  resize     the whole image stretched to the model's input size (no crop, aspect not kept),
             bilinear with antialiasing when shrinking (Pillow's BILINEAR; TensorFlow's
             `resize(method="bilinear", antialias=True)`), rounded to uint8.
  values     (pixel - mean) / std per channel, then quantized with the input tensor's scale and
             zero point (q = round(value / scale) + zero_point), or fed as float. The pipeline's
             own models take raw pixels (mean 0, std 1): their normalization is inside the model.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from edge.files.bounded import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS, read_regular
from edge.errors import InputError

# Modes whose conversion to RGB Pillow and TensorFlow's decoders agree on.
ACCEPTED_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA")


class Normalization(NamedTuple):
    """value = (pixel - mean) / std, per RGB channel; `source` says where the numbers came from."""

    mean: Tuple[float, float, float]
    std: Tuple[float, float, float]
    source: str


def normalization(mean: Union[float, Sequence[float]], std: Union[float, Sequence[float]], source: str) -> Normalization:
    """A Normalization from one value or three per-channel values each; std must be positive."""

    def three(values: Union[float, Sequence[float]], what: str) -> Tuple[float, float, float]:
        values = [float(values)] if isinstance(values, (int, float)) else [float(v) for v in values]
        if len(values) == 1:
            values = values * 3
        if len(values) != 3 or not all(np.isfinite(values)):
            raise InputError(f"input {what} {values} ({source}), expected one number or three (R, G, B)")
        return (values[0], values[1], values[2])

    std3 = three(std, "std")
    if min(std3) <= 0:
        raise InputError(f"input std {list(std3)} ({source}), expected positive numbers")
    return Normalization(three(mean, "mean"), std3, source)


RAW_PIXELS = normalization(0.0, 1.0, "raw pixels 0..255: the model normalizes inside")
# pycoral's classify example feeds mean 128, std 128 unless told otherwise.
PYCORAL_DEFAULT = normalization(128.0, 128.0, "pycoral's default (--input-mean 128 --input-std 128)")


# ---------------------------------------------------------------------------------------------
# Decode and resize


def load_image(source: Union[str, Path, bytes], name: Optional[str] = None, size: Optional[Tuple[int, int]] = None) -> Any:
    """An RGB PIL image from a file or encoded bytes, fully decoded; InputError naming the file if the
    contract cannot take it (unreadable, truncated, CMYK, 16-bit, float). With `size` (the model's
    (width, height)), a JPEG is decoded at the contract's reduced scale for that size."""
    from PIL import Image, UnidentifiedImageError

    name = name or (str(source) if not isinstance(source, bytes) else "image bytes")
    try:
        if not isinstance(source, bytes):  # a FIFO or a device is refused before a read could block on it
            source = read_regular(source, MAX_IMAGE_BYTES, "image", InputError)
        with Image.open(io.BytesIO(source)) as image:
            if image.mode not in ACCEPTED_MODES:
                raise InputError(f"image {name} has mode {image.mode}, expected 8-bit greyscale, palette or RGB(A): "
                                 "convert it to 8-bit RGB first")
            if size is not None and image.format == "JPEG":
                # Pillow's draft picks exactly JPEG_SCALE: min(width // w, height // h), rounded down to 8, 4, 2, 1.
                image.draft(image.mode, tuple(size))
            check_pixels(image.size, name)
            image.load()  # decode now: a truncated file fails here, named, not inside the interpreter call
            return image.convert("RGB")
    except FileNotFoundError as err:
        raise InputError(f"image {name} not found") from err
    except Image.DecompressionBombError as err:
        raise InputError(f"image {name} is too large to decode safely ({err})") from err
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise InputError(f"cannot read image {name}: {decode_error(err)}; expected a complete PNG, JPEG, BMP or GIF file") from err


def decode_error(err: Exception) -> str:
    """What Pillow said of an image it could not read, without the repr of the buffer it read from (which holds a
    memory address: the same file would be named differently from run to run)."""
    from PIL import UnidentifiedImageError

    return "not a format Pillow recognises" if isinstance(err, UnidentifiedImageError) else str(err)


def check_pixels(size: Tuple[int, int], name: str) -> None:
    """Refuse an image whose header declares more than MAX_IMAGE_PIXELS, before it is decoded (an image bomb:
    a 493 KB PNG of 13000x13000 decodes to 500 MB of pixels and took 1.38 GB)."""
    width, height = size
    if width * height > MAX_IMAGE_PIXELS:
        raise InputError(f"image {name} is {width}x{height} pixels, more than the {MAX_IMAGE_PIXELS} this edgeflow "
                         "decodes (docs/trust.md); expected a smaller image")


def resize(image: Any, size: Tuple[int, int]) -> np.ndarray:
    """uint8 [height, width, 3] pixels of an RGB PIL image or uint8 [H, W, 3] array at `size` (width, height)."""
    from PIL import Image

    if not isinstance(image, Image.Image):
        array = np.asarray(image)
        if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
            raise InputError(f"image array {array.dtype} {list(array.shape)}, expected uint8 [height, width, 3] RGB pixels")
        if (array.shape[1], array.shape[0]) == tuple(size):
            return array
        image = Image.fromarray(array)
    elif image.mode != "RGB":
        raise InputError(f"image mode {image.mode}, expected RGB (use edge.pixels.preprocess.load_image)")
    if image.size != tuple(size):
        # Pillow's BILINEAR widens its kernel when shrinking: antialiased, as the contract says.
        image = image.resize(tuple(size), Image.BILINEAR)
    return np.asarray(image)


def load_pixels(source: Union[str, Path, bytes, np.ndarray], size: Tuple[int, int], name: Optional[str] = None,
                scaled: bool = True) -> np.ndarray:
    """Decode (unless already pixels) and resize: the contract's pixels for one image.
    scaled=False decodes JPEGs at full size (contract version 1, and models with no recorded contract)."""
    if isinstance(source, np.ndarray):
        return resize(source, size)
    return resize(load_image(source, name, tuple(size) if scaled else None), size)


# ---------------------------------------------------------------------------------------------
# Pixel values into the input tensor


def quantize(values: Any, scale: float, zero_point: int, dtype: Any) -> np.ndarray:
    """Real values to integers of `dtype`: round(values / scale) + zero_point, clipped to the dtype's range."""
    dtype = np.dtype(dtype)
    if not scale > 0:
        raise InputError(f"quantization scale {scale}, expected a positive number (is the tensor quantized?)")
    info = np.iinfo(dtype)
    q = np.round(np.asarray(values, dtype=np.float64) / scale).astype(np.int64) + int(zero_point)
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(values: Any, scale: float, zero_point: int) -> np.ndarray:
    """Integers to real values: (values - zero_point) * scale, cast to int64 first so uint8 - zp cannot wrap."""
    return ((np.asarray(values).astype(np.int64) - int(zero_point)) * scale).astype(np.float32)


class _Table(NamedTuple):
    values: np.ndarray  # [3, 256]: the input value of each pixel value, per channel
    identity: bool  # every pixel value maps to itself: pixels can go in unchanged


_TABLES: Dict[Tuple[Normalization, float, int, str], _Table] = {}


def _table(norm: Normalization, scale: float, zero_point: int, dtype: Any) -> _Table:
    dtype = np.dtype(dtype)
    key = (norm, float(scale), int(zero_point), dtype.str)
    table = _TABLES.get(key)
    if table is None:
        levels = np.arange(256, dtype=np.float64)
        values = np.stack([quantize((levels - m) / s, scale, zero_point, dtype) for m, s in zip(norm.mean, norm.std)])
        identity = dtype == np.uint8 and bool((values == levels.astype(np.uint8)).all())
        table = _TABLES[key] = _Table(values, identity)
    return table


def pixel_table(norm: Normalization, scale: float, zero_point: int, dtype: Any) -> np.ndarray:
    """[3, 256] table: the quantized input value of each pixel value, per channel (one lookup per pixel)."""
    return _table(norm, scale, zero_point, dtype).values


def passes_raw(norm: Normalization, scale: float, zero_point: int, dtype: Any) -> bool:
    """True when the input's quantization already encodes `norm`: pixel values go in unchanged."""
    if np.dtype(dtype) != np.uint8 or not scale > 0:
        return False
    return _table(norm, scale, zero_point, dtype).identity


def to_input(pixels: np.ndarray, norm: Normalization, details: Dict[str, Any]) -> np.ndarray:
    """The input tensor (batch 1) for uint8 [H, W, 3] pixels, from the input's details dict."""
    dtype = np.dtype(details["dtype"])
    scale, zero_point = details["quantization"]
    if dtype.kind == "f":
        mean, std = np.asarray(norm.mean, np.float32), np.asarray(norm.std, np.float32)
        return ((pixels.astype(np.float32) - mean) / std).astype(dtype)[np.newaxis]
    if not scale > 0:
        raise InputError(f"model input is {dtype} without quantization parameters, expected a quantized or float input")
    if passes_raw(norm, scale, zero_point, dtype):
        return pixels[np.newaxis]
    table = pixel_table(norm, scale, zero_point, dtype)
    out = np.empty(pixels.shape, dtype)
    for channel in range(3):
        out[..., channel] = table[channel][pixels[..., channel]]
    return out[np.newaxis]


def pass_through(details: Dict[str, Any]) -> Normalization:
    """The normalization under which raw pixels reach this input as they are, as pycoral's `set_input` copies image
    bytes: for a quantized input with scale s and zero point z, std 1/s and mean z (z + 128 for int8, where the byte
    is shifted into the signed range); for a float input, raw pixel values (the model normalizes inside).
    Right for every model this pipeline writes (float: raw pixels; int8: Coral's 1/128 grid, or scale 1 before it)
    and for Google's uint8 classifiers; a model that wants something else says so in its metadata or record."""
    dtype = np.dtype(details["dtype"])
    scale, zero_point = details["quantization"]
    if dtype.kind == "f" or not scale > 0:
        return RAW_PIXELS
    mean = int(zero_point) + (128 if dtype == np.int8 else 0)
    return normalization(mean, 1.0 / scale, f"raw pixels as the input's own values (scale {scale:g}, zero point "
                                            f"{zero_point}), as pycoral's set_input feeds them")


def describe(norm: Normalization, details: Dict[str, Any]) -> str:
    """One line for the user: which normalization, and how it reaches the input tensor."""
    dtype = np.dtype(details["dtype"])
    scale, zero_point = details["quantization"]
    numbers = f"mean {_channel_values(norm.mean)}, std {_channel_values(norm.std)}"
    if dtype.kind == "f":
        how = f"fed as {dtype} values"
    elif passes_raw(norm, scale, zero_point, dtype):
        how = f"raw pixels pass straight into the {dtype} input (scale {scale:g}, zero point {zero_point})"
    else:
        how = f"normalized, then quantized to {dtype} (scale {scale:g}, zero point {zero_point})"
    return f"input: {numbers} ({norm.source}); {how}"


def _channel_values(values: Sequence[float]) -> str:
    """Per-channel values as one number when the channels agree ("128"), else as a list ("[0.5, 0.4, 0.3]")."""
    return f"{values[0]:g}" if len(set(values)) == 1 else "[" + ", ".join(f"{v:g}" for v in values) + "]"
