"""From a SavedModel (or a Keras model) to TFLite bytes at batch 1: the functions and the converter for each mode.

    concrete, trackable = serving_function(run.artifact("saved_model"), image_size)
    model_bytes = convert(make_converter(concrete, trackable, Mode.INT8, config, calibration))
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras is tf-keras, like the models

import enum
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from pipeline.console import native_quiet
from pipeline.errors import DataError, ManifestError, PipelineError

# The int8 model's input/output types, by the name --io-type takes and TensorFlow's dtype has. TensorFlow itself is
# imported by the functions that convert: a command that refuses its options before converting never loads it.
IO_TYPES = ("uint8", "int8")


class Mode(enum.Enum):
    """What the exported model computes in."""

    FLOAT32 = "float32"
    INT8 = "int8"
    FLOAT16 = "float16"
    DYNAMIC_RANGE = "dynamic-range"


# The last SavedModel loaded, by its path and its files' times and sizes, and its batch-1 functions by image size: TensorFlow
# keeps every loaded graph's functions for the process's life (EfficientNetB0: about 85 MB a load), and the remedy
# ladder converts the same SavedModel once a rung (bench/results/remedy.md, "Memory").
_LOADED: dict = {}


def load_saved_model(saved_model: Path):
    """`tf.saved_model.load`, once per SavedModel while it is unchanged (the last one loaded is kept)."""
    import tensorflow as tf

    files = (Path(saved_model) / "saved_model.pb", Path(saved_model) / "variables" / "variables.index")
    key = (str(Path(saved_model).resolve()), *((f.stat().st_mtime_ns, f.stat().st_size) if f.exists() else None for f in files))
    if _LOADED.get("key") != key:
        _LOADED.clear()
        _LOADED.update(key=key, loaded=tf.saved_model.load(str(saved_model)), functions={})
    return _LOADED["loaded"]


def serving_function(saved_model: Path, image_size: int):
    """RUN's serving signature wrapped at a static [1,S,S,3] float32 input; returns (concrete function, loaded object)."""
    loaded = load_saved_model(saved_model)
    functions = _LOADED["functions"]
    if image_size not in functions:
        functions[image_size] = _batch1(saved_model, loaded, image_size)
    return functions[image_size], loaded


def _batch1(saved_model: Path, loaded, image_size: int):
    import tensorflow as tf

    if "serving_default" not in loaded.signatures:
        raise ManifestError(f"{saved_model} has signatures {sorted(loaded.signatures)}, expected 'serving_default'")
    fn = loaded.signatures["serving_default"]
    _, specs = fn.structured_input_signature
    if len(specs) != 1 or len(fn.structured_outputs) != 1:
        raise ManifestError(
            f"{saved_model} serving_default takes {sorted(specs)} and returns {sorted(fn.structured_outputs)}; expected one image input and one score output"
        )
    (in_name, spec), = specs.items()
    (out_name,) = fn.structured_outputs
    expected = [image_size, image_size, 3]
    if spec.shape.rank != 4 or spec.shape.as_list()[1:] != expected:
        raise DataError(
            f"{saved_model} takes input {spec.shape.as_list()}, but the manifest's image_size {image_size} expects [None, {image_size}, {image_size}, 3]; "
            f"the manifest does not describe this SavedModel"
        )

    @tf.function(input_signature=[tf.TensorSpec([1] + expected, tf.float32, name=in_name)])
    def batch1(image):
        return fn(**{in_name: image})[out_name]

    return batch1.get_concrete_function()


def keras_function(model, image_size: int):
    """A Keras model (the QAT one) wrapped the same way as `serving_function`."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([1, image_size, image_size, 3], tf.float32, name="image")])
    def batch1(image):
        return model(image, training=False)

    return batch1.get_concrete_function(), model


def make_converter(concrete, trackable, mode: Mode, config, calibration: Optional[np.ndarray]):
    """A fresh TFLiteConverter for `mode` (a converter is single-use in TF 2.21: a second convert() fails)."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], trackable)
    if mode is Mode.FLOAT32:
        return converter
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if mode is Mode.FLOAT16:
        converter.target_spec.supported_types = [tf.float16]
    elif mode is Mode.INT8:
        assert calibration is not None
        converter.representative_dataset = _representative(calibration)
        # INT8 only: an op with no integer kernel fails the conversion instead of staying float.
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        io = tf.as_dtype(config.io_type or "uint8")
        converter.inference_input_type = io
        converter.inference_output_type = io
        if config.per_tensor:
            # No public switch exists in TF 2.21; this is the converter's own flag for per-tensor weights.
            converter._experimental_disable_per_channel = True
    return converter


def _representative(images: np.ndarray) -> Callable:
    def dataset():
        for image in images:
            yield [image[None].astype(np.float32)]

    return dataset


def convert(converter) -> bytes:
    """The converter's bytes; its failure as one PipelineError naming the first line of its message."""
    try:
        with native_quiet():  # the converter prints "fully_quantize: ..." from C++
            return converter.convert()
    except Exception as err:  # the converter raises ConverterError and a handful of others
        first = str(err).strip().splitlines()[0][:400] if str(err).strip() else type(err).__name__
        raise PipelineError(f"TFLite conversion failed: {first}") from err
