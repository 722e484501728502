"""A Keras model file (`.keras`, `.h5`) as `pipeline import` reads it: loaded with Keras 3, which reads both (the
project's tf-keras cannot read a Keras 3 `.keras`), then exported as a SavedModel any TensorFlow reads."""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Optional

from pipeline.errors import ConfigError
from pipeline.importing import saved_model

SUFFIXES = (".keras", ".h5", ".hdf5")
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# A first layer that maps pixels 0..255 to the model's range: what Keras' own image tutorials put first.
_PIXEL_SCALES = (1 / 255.0, 1 / 127.5)


def check_format(path: Path) -> None:
    """Refuse a file whose bytes are not what its suffix claims (a `.keras` is a zip archive, an `.h5` an HDF5 file)."""
    if path.suffix == ".keras":
        if not zipfile.is_zipfile(path):
            raise ConfigError(f"{path} is not a Keras archive (a .keras file is a zip holding config.json); expected a file "
                              "written by model.save('NAME.keras')")
        with zipfile.ZipFile(path) as archive:
            if "config.json" not in archive.namelist():
                raise ConfigError(f"{path} is a zip without config.json; expected a file written by model.save('NAME.keras')")
        return
    with open(path, "rb") as f:
        if f.read(8) != _HDF5_SIGNATURE:
            raise ConfigError(f"{path} is not an HDF5 file; expected a Keras model written by model.save('NAME.h5')")


def load(path: Path):
    """The Keras 3 model in `path`; ConfigError when Keras cannot read it."""
    import keras

    try:
        return keras.models.load_model(str(path), compile=False)
    except Exception as err:  # Keras' reasons vary (custom layers, a weights-only file)
        raise ConfigError(f"{path} could not be loaded by Keras {keras.__version__} ({type(err).__name__}: "
                          f"{str(err).splitlines()[0][:200] if str(err) else ''}); expected a whole model (architecture and weights) "
                          "without custom layers") from None


def read(path: Path, scratch: Path) -> saved_model.Loaded:
    """The Keras model as a SavedModel in `scratch`, with what the model says of its input."""
    import keras

    check_format(path)
    model = load(path)
    if len(model.inputs) != 1:
        raise ConfigError(f"{path} has {len(model.inputs)} inputs; expected one image input")
    folder = scratch / "exported"
    model.export(str(folder), format="tf_saved_model", verbose=False)
    return saved_model.read(folder, normalizes=own_normalization(model), fmt="keras", reader=f"Keras {keras.__version__}")


def own_normalization(model) -> Optional[str]:
    """The layer the model opens with that takes pixels 0..255 (a Rescaling by 1/255 or 1/127.5, or a Normalization),
    named; None when the model does not open with one. Augmentation layers (identity at inference) are passed over."""
    for layer in _leading_layers(model):
        kind = type(layer).__name__
        if kind == "Rescaling":
            scale = getattr(layer, "scale", None)
            if isinstance(scale, (int, float)) and any(abs(scale - s) < 1e-6 for s in _PIXEL_SCALES):
                return f"Rescaling layer {layer.name!r} (scale {scale:.6g}, offset {getattr(layer, 'offset', 0):g})"
            return None
        if kind == "Normalization":
            return f"Normalization layer {layer.name!r}"
        if kind.startswith("Random") or kind == "InputLayer":
            continue
        return None
    return None


def _leading_layers(model):
    """The model's layers in order, nested Sequential and functional blocks opened."""
    for layer in getattr(model, "layers", []):
        if hasattr(layer, "layers") and type(layer).__name__ in ("Sequential", "Functional"):
            yield from _leading_layers(layer)
        else:
            yield layer
