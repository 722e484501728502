"""Coral's input convention for int8 exports: raw camera bytes are the model's normalized input.

    from pipeline.quant import convention
    concrete, calibration = convention.wrap(concrete, calibration_images)   # before converting
    convention.check(input_quantization, "uint8")                             # after

Google's Coral classifiers take a uint8 input quantized with scale 1/128 and zero point 128: the byte
p stands for the real value (p - 128) / 128. pycoral's classify_image.py (default --input_mean 128
--input_std 128), MediaPipe and the TFLite Task Library pass camera bytes straight into such an
input. Our SavedModels take raw pixels 0..255 (the normalization is their first layer), so the int8
export converts a wrapper instead: its input is x = (p - 128) / 128 and it feeds x * 128 + 128 to the
SavedModel, which then gets every byte p back as the pixel value p, unchanged. Calibrating the wrapper
on x makes the converter choose the input's quantization from x's range; that range is pinned to
[-1, 127/128] (the values of bytes 0 and 255), so the scale is exactly 1/128 and the zero point 128
(int8 I/O: the same grid shifted, zero point 0). The wrapper's MUL and ADD are ordinary quantized ops
that the Edge TPU maps, like the Rescaling layer behind them.

Their outputs are pinned too, to the integer grid (scale 1): x * 128 to [-128, 127], the pixel to
[0, 255]. Calibration alone is not enough: TF 2.21's converter gave the MUL's output the range of the
MUL and the ADD together, [-128, 255] (scale 383/255, about 1.502), and 85 of the 256 bytes then
reached the SavedModel one grey level off. The pins are FakeQuant ops, which the converter turns into
those tensors' quantization and drops; in float they round values that are whole numbers already.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, Tuple

import numpy as np

from edge.pixels.contract import PixelContract
from edge.pixels.preprocess import normalization
from pipeline.errors import PipelineError

MEAN = 128.0  # the pixel contract's mean and std for an int8 model: tensor value = (pixel - 128) / 128
STD = 128.0
SCALE = 1.0 / 128.0
ZERO_POINT = {"uint8": 128, "int8": 0}  # byte 128 (uint8) or 0 (int8) stands for the value 0.0
LOW, HIGH = (0 - MEAN) / STD, (255 - MEAN) / STD  # -1 and 127/128: bytes 0 and 255


def normalize(images: np.ndarray) -> np.ndarray:
    """uint8 pixels [N,S,S,3] as the wrapper's float32 input (p - 128) / 128, with the range pinned to bytes 0..255.

    The converter quantizes the input over the range it saw in calibration. Photos that never reach
    0 or 255 would give a slightly other scale, so where the calibration images miss an end, the first
    image's first pixel value is set to it (one value of one image: the other tensors' ranges barely move).
    """
    x = (images.astype(np.float32) - MEAN) / STD
    if x.size:
        flat = x.reshape(len(x), -1)
        if flat.min() > LOW:
            flat[0, 0] = LOW
        if flat.max() < HIGH:
            flat[0, 1 if flat.size > 1 else 0] = HIGH
    return x


def wrap(concrete: Any, calibration: np.ndarray) -> Tuple[Any, np.ndarray]:
    """(the wrapper as a concrete function of x, the calibration images as x) for the int8 converter."""
    import tensorflow as tf

    spec = concrete.structured_input_signature[0][0]  # the batch-1 [1,S,S,3] float32 image of serving_function

    def on_integer_grid(values, low: float, high: float):
        # 256 levels from low to high, both whole numbers 255 apart: scale exactly 1, every whole number kept.
        return tf.quantization.fake_quant_with_min_max_args(values, min=low, max=high, num_bits=8)

    @tf.function(input_signature=[tf.TensorSpec(spec.shape, tf.float32, name="image")])
    def coral_input(x):
        # x * 128 + 128 is the raw pixel again: the SavedModel keeps its own contract.
        centred = on_integer_grid(x * STD, LOW * STD, HIGH * STD)  # p - 128
        return concrete(on_integer_grid(centred + MEAN, 0.0, 255.0))  # p

    return coral_input.get_concrete_function(), normalize(calibration)


def check(input_q: Dict[str, Any], io_type: str) -> None:
    """Refuse a model whose input is not exactly Coral's grid (a converter that changed how it calibrates)."""
    expected = ZERO_POINT[io_type]
    if input_q.get("dtype") != io_type or input_q.get("scale") != SCALE or input_q.get("zero_point") != expected:
        raise PipelineError(
            f"the converted model's input is {input_q.get('dtype')} with scale {input_q.get('scale')!r}, zero point "
            f"{input_q.get('zero_point')!r}; expected {io_type} with scale 1/128 ({SCALE!r}), zero point {expected} "
            "(Coral's convention, so raw camera bytes are the normalized input)")


def contract(run_contract: PixelContract, int8: bool) -> PixelContract:
    """The pixel contract one exported model truly takes: the run's (raw pixels, mean 0, std 1) for float
    models, the same decode and resize with mean 128 and std 128 for an int8 model."""
    if not int8:
        return run_contract
    return replace(run_contract, norm=normalization(MEAN, STD, "Coral's convention: the int8 input's bytes are (pixel - 128) / 128"))
