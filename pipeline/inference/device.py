"""The int8 and Edge TPU models as the device runs them: edge's own functions, one image at a time."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np

from edge import preprocess


def tflite_scorer(model: Path, edgetpu: bool, norm: preprocess.Normalization,
                  threads: Optional[int] = None) -> Callable[[np.ndarray], np.ndarray]:
    """score(pixels) -> dequantized scores of one image (uint8 [S, S, 3], the pixel contract's pixels).

    The one place `pipeline predict` runs a TFLite model: edge's make_interpreter, set_input, invoke and
    get_scores, as `pipeline parity` scores the int8 model and `edge classify` answers on the device.
    (To run it through another device runner, change this function only.)
    """
    from edge.classify import get_scores, set_input
    from edge.interpreter import make_interpreter

    interpreter = make_interpreter(model, edgetpu=edgetpu, threads=threads)

    def score(pixels: np.ndarray) -> np.ndarray:
        set_input(interpreter, pixels, norm)
        interpreter.invoke()
        return get_scores(interpreter)

    return score
