"""The TFLite converter as every detector head's export sets it up: full-integer int8 calibrated on raw pixels with
Coral's uint8 input, or the float twin. What follows the conversion (the head's outputs, its checks, its metadata) is
the head's own export (pipeline/tasks/detect/heads/<head>/)."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Iterable, List, Optional

import numpy as np
import tensorflow as tf

from pipeline.errors import DataError
from pipeline.quant import convention


def converter(concrete, trackable, image_size: int, *, int8: bool, calibration: Optional[Iterable[np.ndarray]] = None):
    """A converter of `concrete` (raw pixels [1, S, S, 3] float32 in): int8 up to the outputs, Coral's uint8 input,
    calibrated on `calibration` (uint8 [S, S, 3] images at the input size); or float32, which takes none."""
    if not int8:
        if calibration is not None:
            raise DataError("calibration images are for the int8 model; the float twin takes none")
        return tf.lite.TFLiteConverter.from_concrete_functions([concrete], trackable)
    images = calibration_array(calibration, image_size)
    concrete, x = convention.wrap(concrete, images)
    made = tf.lite.TFLiteConverter.from_concrete_functions([concrete], trackable)
    made.optimizations = [tf.lite.Optimize.DEFAULT]
    made.representative_dataset = lambda: ([image[None]] for image in x)
    made.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    made.inference_input_type = tf.uint8
    return made


def calibration_array(calibration: Optional[Iterable[np.ndarray]], image_size: int) -> np.ndarray:
    """The calibration images as one uint8 [N, S, S, 3] array, each checked."""
    if calibration is None:
        raise DataError("the int8 detector needs calibration images; expected uint8 [S, S, 3] images at the input size")
    images: List[np.ndarray] = [np.asarray(image) for image in calibration]
    expected = (image_size, image_size, 3)
    for i, image in enumerate(images):
        if image.dtype != np.uint8 or image.shape != expected:
            raise DataError(f"calibration image {i} is {image.dtype} {list(image.shape)}, expected uint8 "
                            f"[{image_size}, {image_size}, 3] (raw pixels at the detector's input size)")
    if not images:
        raise DataError("calibration holds no images; expected at least 1")
    return np.stack(images)
