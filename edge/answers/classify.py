"""Classification over a TFLite interpreter, in pycoral's manner: small free functions, NamedTuple results.

    from edge.model.interpreter import make_interpreter
    from edge.answers.classify import set_input, get_scores, top_k
    from edge.pixels.preprocess import load_image
    interpreter = make_interpreter("model_int8.tflite")
    set_input(interpreter, load_image("cat.png"))      # raw bytes, as pycoral feeds them; or pass a Normalization
    interpreter.invoke()
    print(top_k(get_scores(interpreter), k=3, labels=["cat", "dog"]))

Pixels reach the input tensor by the pixel contract (edge.pixels.preprocess): stretched bilinear resize,
then (pixel - mean) / std quantized with the input's scale and zero point. The pipeline's float models
take raw pixels (mean 0, std 1); its int8 models mean 128, std 128 on Coral's uint8 grid (scale 1/128,
zero point 128), so raw bytes go in unchanged; int8 models exported before that took mean 0, std 1 on
scale 1, zero point 0. Without a normalization, set_input feeds raw pixels as the input's own values
(edge.pixels.preprocess.pass_through), which is each of those; `edge`'s commands read the model's record or metadata.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from edge.errors import InputError, ModelLoadError
from edge.pixels.preprocess import Normalization, dequantize, pass_through, resize, to_input


class Class(NamedTuple):
    id: int
    score: float
    label: str


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


def set_input(interpreter: Any, image: Any, norm: Optional[Normalization] = None) -> None:
    """Put one image (PIL image, or uint8 (H, W, 3) pixels) into the model's input, by the pixel contract.

    `norm` is the model's normalization (its recorded contract or TFLite metadata); without it the pixels go in
    as the input's own values, as pycoral's set_input copies them (edge.pixels.preprocess.pass_through): right for the
    pipeline's float and int8 models and for Google's uint8 classifiers. Many images into one interpreter:
    `input_writer` reads the input's details once.
    """
    input_writer(interpreter, norm)(image)


def input_writer(interpreter: Any, norm: Optional[Normalization] = None) -> Callable[[Any], None]:
    """set_input for one interpreter and normalization as a function of the image, the input's details read and
    checked once (asking the interpreter for them costs more than the rest of writing a small input)."""
    details = input_details(interpreter)
    shape = tuple(int(x) for x in details["shape"])
    if shape[0] != 1:
        raise InputError(f"model input batch {shape[0]}, expected 1: set_input puts one image in")
    size, index, norm = input_size(interpreter), details["index"], norm or pass_through(details)

    def write(image: Any) -> None:
        interpreter.set_tensor(index, to_input(resize(image, size), norm, details))

    return write


def invoke(interpreter: Any, what: str = "the input") -> None:
    """interpreter.invoke(), with the interpreter's own errors (a model that loads but cannot run) as a
    ModelLoadError naming `what` (the image), so a command prints one line instead of a traceback."""
    try:
        interpreter.invoke()
    except (RuntimeError, ValueError) as err:
        raise ModelLoadError(f"the interpreter failed on {what}: {str(err).strip()}") from err


def output_details(interpreter: Any) -> Dict[str, Any]:
    details = interpreter.get_output_details()
    if len(details) != 1:
        raise InputError(f"model has {len(details)} outputs, expected 1 score output")
    return details[0]


def get_scores(interpreter: Any) -> np.ndarray:
    """The output scores of the one image in the batch, dequantized to float32 (many images: `score_reader`)."""
    return score_reader(interpreter)()


def score_reader(interpreter: Any) -> Callable[[], np.ndarray]:
    """get_scores for one interpreter as a function called after each invoke, the output's details read once."""
    details = output_details(interpreter)
    index, (scale, zero_point) = details["index"], details["quantization"]
    as_float = np.dtype(details["dtype"]).kind == "f" or scale == 0

    def read() -> np.ndarray:
        raw = interpreter.get_tensor(index)
        if raw.ndim == 2:
            if raw.shape[0] != 1:
                raise InputError(f"model output shape {raw.shape}, expected (1, classes)")
            raw = raw[0]
        elif raw.ndim != 1:
            raise InputError(f"model output shape {raw.shape}, expected (1, classes) scores")
        return raw.astype(np.float32) if as_float else dequantize(raw, scale, zero_point)

    return read


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


def classify(interpreter: Any, image: Any, k: int = 1, labels: Optional[Sequence[str]] = None,
             norm: Optional[Normalization] = None) -> List[Class]:
    """set_input, invoke, top_k: one image in, its k best classes out."""
    set_input(interpreter, image, norm)
    invoke(interpreter)
    return top_k(get_scores(interpreter), k=k, labels=labels)
