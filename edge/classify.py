"""Classification over a TFLite interpreter, in pycoral's manner: small free functions, NamedTuple results.

    from edge.interpreter import make_interpreter
    from edge.classify import set_input, get_scores, top_k
    interpreter = make_interpreter("model_int8.tflite")
    set_input(interpreter, Image.open("cat.png"))
    interpreter.invoke()
    print(top_k(get_scores(interpreter), k=3, labels=["cat", "dog"]))

Models take raw RGB pixels (0..255) and carry their own preprocessing, so set_input only
resizes and quantizes: q = round(pixel / scale) + zero_point. With uint8 input, scale 1 and
zero point 0 that is the identity and the pixels go in unchanged.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from edge.errors import InputError


class Class(NamedTuple):
    id: int
    score: float
    label: str


def _range(dtype: np.dtype) -> Tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def quantize(values: Any, scale: float, zero_point: int, dtype: Any) -> np.ndarray:
    """Real values to integers of `dtype`: round(values / scale) + zero_point, clipped to the dtype's range."""
    dtype = np.dtype(dtype)
    if not scale > 0:
        raise InputError(f"quantization scale {scale}, expected a positive number (is the tensor quantized?)")
    low, high = _range(dtype)
    q = np.round(np.asarray(values, dtype=np.float64) / scale).astype(np.int64) + int(zero_point)
    return np.clip(q, low, high).astype(dtype)


def dequantize(values: Any, scale: float, zero_point: int) -> np.ndarray:
    """Integers to real values: (values - zero_point) * scale, cast to int64 first so uint8 - zp cannot wrap."""
    return ((np.asarray(values).astype(np.int64) - int(zero_point)) * scale).astype(np.float32)


def input_details(interpreter: Any, key: Optional[str] = None) -> Any:
    """The details dict of the model's (single) input, or one entry of it."""
    details = interpreter.get_input_details()
    if len(details) != 1:
        raise InputError(f"model has {len(details)} inputs, expected 1 image input")
    return details[0] if key is None else details[0][key]


def input_size(interpreter: Any) -> Tuple[int, int]:
    """(width, height) of the model's image input, as Pillow counts sizes."""
    shape = tuple(int(x) for x in input_details(interpreter, "shape"))
    if len(shape) != 4 or shape[3] != 3:
        raise InputError(f"model input shape {shape}, expected (1, height, width, 3) for RGB images")
    return shape[2], shape[1]


# 256-entry tables for uint8 pixels to a quantized input: one lookup instead of float arithmetic
# on every pixel, so set_input costs little next to invoke (bench/bench_edge_overhead.py).
_LUT_CACHE: Dict[Tuple[float, int, str], np.ndarray] = {}


def _pixel_table(scale: float, zero_point: int, dtype: np.dtype) -> np.ndarray:
    key = (float(scale), int(zero_point), dtype.str)
    table = _LUT_CACHE.get(key)
    if table is None:
        table = quantize(np.arange(256), scale, zero_point, dtype)
        _LUT_CACHE[key] = table
    return table


def _as_pixels(image: Any, size: Tuple[int, int]) -> np.ndarray:
    """An (height, width, 3) array of the image at `size`, resized with Pillow when needed."""
    from PIL import Image

    if isinstance(image, Image.Image):
        if image.mode != "RGB":
            image = image.convert("RGB")
        if image.size != size:
            image = image.resize(size, Image.BILINEAR)
        return np.asarray(image)
    array = np.asarray(image)
    if array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 3 or array.shape[2] != 3:
        raise InputError(f"image array of shape {array.shape}, expected (height, width, 3) RGB pixels")
    if (array.shape[1], array.shape[0]) != size:
        if array.dtype != np.uint8:
            raise InputError(
                f"input size {(array.shape[1], array.shape[0])} with dtype {array.dtype}, expected {size}: "
                "only uint8 images are resized; resize it first"
            )
        array = np.asarray(Image.fromarray(array).resize(size, Image.BILINEAR))
    return array


def set_input(interpreter: Any, image: Any) -> None:
    """Put one image (PIL image or (H, W, 3) pixel array, values 0..255) into the model's input."""
    details = input_details(interpreter)
    shape = tuple(int(x) for x in details["shape"])
    if shape[0] != 1:
        raise InputError(f"model input batch {shape[0]}, expected 1: set_input puts one image in")
    pixels = _as_pixels(image, input_size(interpreter))
    dtype = np.dtype(details["dtype"])
    scale, zero_point = details["quantization"]
    if dtype.kind == "f":
        data = pixels.astype(dtype)
    elif scale == 0:
        raise InputError(f"model input is {dtype} without quantization parameters, expected a quantized or float input")
    elif pixels.dtype == np.uint8:
        if dtype == np.uint8 and abs(scale - 1.0) < 1e-6 and zero_point == 0:
            data = pixels  # raw pixels go in unchanged
        else:
            data = _pixel_table(scale, zero_point, dtype)[pixels]
    else:
        data = quantize(pixels, scale, zero_point, dtype)
    interpreter.set_tensor(details["index"], data[np.newaxis])


def output_details(interpreter: Any) -> Dict[str, Any]:
    details = interpreter.get_output_details()
    if len(details) != 1:
        raise InputError(f"model has {len(details)} outputs, expected 1 score output")
    return details[0]


def get_scores(interpreter: Any) -> np.ndarray:
    """The output scores of the one image in the batch, dequantized to float32."""
    details = output_details(interpreter)
    raw = interpreter.get_tensor(details["index"])
    if raw.ndim == 2:
        if raw.shape[0] != 1:
            raise InputError(f"model output shape {raw.shape}, expected (1, classes)")
        raw = raw[0]
    elif raw.ndim != 1:
        raise InputError(f"model output shape {raw.shape}, expected (1, classes) scores")
    scale, zero_point = details["quantization"]
    if np.dtype(details["dtype"]).kind == "f" or scale == 0:
        return raw.astype(np.float32)
    return dequantize(raw, scale, zero_point)


def label_of(class_id: int, labels: Optional[Sequence[str]]) -> str:
    if labels is not None and 0 <= class_id < len(labels):
        return str(labels[class_id])
    return str(class_id)


def top_k(scores: Any, k: int = 1, labels: Optional[Sequence[str]] = None, threshold: float = float("-inf")) -> List[Class]:
    """The k highest scores as Class(id, score, label), best first; ties keep the lower id first."""
    scores = np.asarray(scores, dtype=np.float32).reshape(-1)
    if k < 1:
        raise InputError(f"top-k {k}, expected 1 or more")
    if labels is not None and len(labels) != scores.size:
        raise InputError(f"{len(labels)} labels for {scores.size} model outputs, expected as many labels as outputs")
    order = np.argsort(-scores, kind="stable")[:k]
    return [Class(int(i), float(scores[i]), label_of(int(i), labels)) for i in order if scores[i] >= threshold]


def classify(interpreter: Any, image: Any, k: int = 1, labels: Optional[Sequence[str]] = None) -> List[Class]:
    """set_input, invoke, top_k: one image in, its k best classes out."""
    set_input(interpreter, image)
    interpreter.invoke()
    return top_k(get_scores(interpreter), k=k, labels=labels)


def load_image(path: Union[str, Any]) -> Any:
    """An RGB PIL image from a file, or InputError saying why not."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except FileNotFoundError as err:
        raise InputError(f"image {path} not found") from err
    except (UnidentifiedImageError, OSError) as err:
        raise InputError(f"cannot read image {path}: {err}; expected a PNG or JPEG file") from err
