"""The int8 model `pipeline export --int8` writes, made from a Keras model without a run, for the benchmarks.

    from bench.export.as_exported import int8_as_exported
    model_bytes = int8_as_exported(keras_model, 224, calibration_uint8_images)

The export stage's own steps, in its order: the batch-1 function (pipeline.quant.convert.keras_function),
Coral's input wrapper (pipeline.quant.convention.wrap: the input takes bytes on scale 1/128, zero point 128),
the export converter (make_converter, Mode.INT8, uint8 I/O, per channel) and convention.check of the input
it got. What it leaves out, the TFLite metadata and the sidecar, changes no op and no tensor: the
interpreter runs the same graph.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np


def int8_as_exported(model, image_size: int, calibration: np.ndarray) -> bytes:
    """`model` (raw pixels in) as `pipeline export --int8` converts it; `calibration` is uint8 [N,S,S,3]."""
    import tensorflow as tf

    from pipeline.export import ExportConfig
    from pipeline.quant import convention
    from pipeline.quant.convert import Mode, convert, keras_function, make_converter

    concrete, trackable = keras_function(model, image_size)
    wrapped, inputs = convention.wrap(concrete, calibration)
    data = convert(make_converter(wrapped, trackable, Mode.INT8, ExportConfig(mode=Mode.INT8), inputs))
    detail = tf.lite.Interpreter(model_content=data).get_input_details()[0]
    scale, zero_point = detail["quantization"]
    convention.check({"dtype": np.dtype(detail["dtype"]).name, "scale": float(scale), "zero_point": int(zero_point)}, "uint8")
    return data


def float_as_exported(model, image_size: int) -> bytes:
    """`model` as `pipeline export` (float32) converts it: no wrapper, raw pixels in."""
    from pipeline.export import ExportConfig
    from pipeline.quant.convert import Mode, convert, keras_function, make_converter

    concrete, trackable = keras_function(model, image_size)
    return convert(make_converter(concrete, trackable, Mode.FLOAT32, ExportConfig(), None))
