"""A SavedModel folder as `pipeline import` reads it: its serving signature's one image input and one score output."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Optional

from pipeline.errors import ConfigError
from pipeline.importing.contract import ModelInput


class Loaded(NamedTuple):
    """A model read by one of the format readers, as a SavedModel the wrapper builds on."""

    format: str  # keras | savedmodel | onnx
    input: ModelInput
    num_outputs: int  # the classes the score output holds
    saved_model: Path  # a SavedModel folder whose serving_default signature is the model as given
    reader: str  # what read it (library and version)
    converted_layout: Optional[str] = None  # the SavedModel's own input layout when a conversion changed it (ONNX: nhwc)
    batch: Optional[int] = None  # the SavedModel's fixed batch size, None when it takes any
    facts: Optional[dict] = None  # what the reader did that the run records (a detector's cut tail)


def is_saved_model(path: Path) -> bool:
    return path.is_dir() and (path / "saved_model.pb").is_file()


def read(path: Path, normalizes: Optional[str] = None, fmt: str = "savedmodel", reader: Optional[str] = None,
         layout: Optional[str] = None) -> Loaded:
    """The SavedModel at `path`, checked to have one image input and one [batch, classes] output."""
    import tensorflow as tf

    if not is_saved_model(path):
        raise ConfigError(f"{path} is not a SavedModel folder (no saved_model.pb in it); expected a folder written by "
                          "tf.saved_model.save, model.export or model.save(..., save_format='tf')")
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as err:  # a damaged or foreign file: TensorFlow's own reasons vary
        raise ConfigError(f"{path} could not be read as a SavedModel ({type(err).__name__}: {str(err).splitlines()[0][:200]}); "
                          "expected a folder written by TensorFlow") from None
    signatures = dict(loaded.signatures)
    if "serving_default" not in signatures:
        raise ConfigError(f"{path} has signatures {sorted(signatures) or 'none'}; expected 'serving_default'")
    fn = signatures["serving_default"]
    _, specs = fn.structured_input_signature
    outputs = fn.structured_outputs
    if len(specs) != 1:
        raise ConfigError(f"{path}: serving_default takes {len(specs)} inputs ({', '.join(sorted(specs))}); expected one image input")
    if len(outputs) != 1:
        raise ConfigError(f"{path}: serving_default returns {len(outputs)} outputs ({', '.join(sorted(outputs))}); "
                          "expected one output of class scores for --task classify")
    (name, spec), = specs.items()
    (out_spec,) = outputs.values()
    shape = spec.shape.as_list() if spec.shape.rank is not None else []
    out_shape = out_spec.shape.as_list() if out_spec.shape.rank is not None else []
    if len(out_shape) != 2 or out_shape[1] is None:
        raise ConfigError(f"{path}: its output has shape {out_shape}; expected [batch, classes] class scores for --task classify")
    return Loaded(fmt, ModelInput(name, shape, spec.dtype.name, normalizes, layout), int(out_shape[1]), path,
                  reader or f"TensorFlow {tf.__version__}", batch=shape[0] if shape else None)
