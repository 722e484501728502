"""An ONNX classifier (what `torch.onnx.export` writes: NCHW, normalized float input) as `pipeline import` reads it:
checked, then converted to a TensorFlow SavedModel by onnx2tf (the converter the field uses for ONNX to TFLite: NHWC
from input to output, no per-layer transposes left, batch 1, static shapes).

onnx2tf's `convert()` runs the ONNX model once on sample images to check its own transposes, and would download
them (`calibration_image_sample_data_20x128x128x3_float32.npy`, from GitHub) unless a file of that name is in the
current directory: it runs here in a temporary directory holding that file, made from the user's own images, so the
conversion never touches the network.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import numpy as np

from pipeline.errors import ConfigError
from pipeline.importing.contract import Given, ModelInput, resolve
from pipeline.importing.saved_model import Loaded, read as read_saved_model

SAMPLE_NAME = "calibration_image_sample_data_20x128x128x3_float32.npy"  # what onnx2tf looks for in the cwd
SAMPLE_COUNT, SAMPLE_SIZE = 20, 128
NEEDS = "onnx and onnxruntime (the `import` extra) and onnx2tf"


def read(path: Path, scratch: Path, given: Given, sample_images: Optional[np.ndarray] = None) -> Loaded:
    """The ONNX model converted to a SavedModel in `scratch`, with what its file says of its input."""
    onnx = _need("onnx")
    model = _load(onnx, path)
    model_input = _image_input(model, path)
    _check_ops(model, path)
    outputs = list(model.graph.output)
    if len(outputs) != 1:
        raise ConfigError(f"{path} has {len(outputs)} outputs ({', '.join(o.name for o in outputs)}); expected one output of "
                          "class scores for --task classify")
    resolve(model_input, given, str(path))  # what is missing or contradicts is refused before the conversion runs
    size = given.image_size
    shape = model_input.shape
    overwrite = None
    if len(shape) == 4 and (shape[2] is None or shape[3] is None) and size:
        overwrite = [f"{model_input.name}:1,{shape[1] or 3},{size},{size}"]
    folder = scratch / "onnx2tf"
    # Converted with a dynamic batch first, so the float SavedModel takes batches (predict, the remedy's scoring); a
    # model whose graph fixes batch 1 inside (a reshape to [1, -1]) is converted again at batch 1.
    # A dynamic height and width is fixed by overwriting the whole input shape, batch 1 included.
    batched = overwrite is None
    if batched:
        _convert(_any_batch(onnx, model, scratch), folder, None, sample_images, None)
        batched = _takes_batches(folder, model_input, size)
        if not batched:
            shutil.rmtree(folder)
    if not batched:
        # A copy: onnx2tf writes its shape inference back into the file it converts, and the user's file is theirs.
        copy = scratch / "batch1.onnx"
        shutil.copyfile(path, copy)
        _convert(copy, folder, overwrite, sample_images, 1)
    loaded = read_saved_model(folder, fmt="onnx", reader=_reader())
    # The converted model takes NHWC; the original's own input (the reference's) is what the file says.
    return loaded._replace(input=model_input, converted_layout="nhwc")


def _any_batch(onnx, model, scratch: Path) -> Path:
    """A copy of the model whose input and outputs take any batch size."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for value in (*copy.graph.input, *copy.graph.output):
        dims = value.type.tensor_type.shape.dim
        if len(dims):
            dims[0].Clear()
            dims[0].dim_param = "batch"
    path = scratch / "any_batch.onnx"
    onnx.save(copy, str(path))
    return path


def _takes_batches(folder: Path, model_input: ModelInput, size: Optional[int]) -> bool:
    """Whether the converted SavedModel answers a batch of 2."""
    import tensorflow as tf

    try:
        fn = tf.saved_model.load(str(folder)).signatures["serving_default"]
        (name, spec), = fn.structured_input_signature[1].items()
        shape = [2] + [d if d is not None else size for d in spec.shape.as_list()[1:]]
        out = next(iter(fn(**{name: tf.zeros(shape, spec.dtype)}).values()))
        return out.shape[0] == 2
    except Exception:  # noqa: BLE001 - any failure means: not at batch 2
        return False


def check_format(path: Path) -> None:
    onnx = _need("onnx")
    _load(onnx, path)


def _need(name: str):
    """Module NAME; when it is missing, one line naming what is missing of the three an ONNX import needs, with the
    command that installs them."""
    if importlib.util.find_spec(name) is None:
        from pipeline.importing.install_command import import_install_command

        missing = [n for n in ("onnx", "onnxruntime", "onnx2tf") if importlib.util.find_spec(n) is None]
        raise ConfigError(f"importing an ONNX model needs {NEEDS}; {', '.join(missing)} not installed; install with: "
                          f"{import_install_command(missing)}")
    with recursion_limit_kept():  # onnx2tf sets it on import
        return importlib.import_module(name)


def _load(onnx, path: Path):
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as err:  # protobuf's DecodeError, onnx's ValidationError
        raise ConfigError(f"{path} is not a valid ONNX model ({type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}); "
                          "expected a file written by torch.onnx.export or another ONNX exporter") from None
    if not model.graph.node:
        raise ConfigError(f"{path} is not an ONNX model (no graph nodes); expected a file written by torch.onnx.export")
    return model


def _image_input(model, path: Path) -> ModelInput:
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise ConfigError(f"{path} has {len(inputs)} inputs ({', '.join(i.name for i in inputs)}); expected one image input")
    tensor = inputs[0].type.tensor_type
    from onnx import TensorProto

    dtype = TensorProto.DataType.Name(tensor.elem_type).lower()
    shape: List[Optional[int]] = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                                  for d in tensor.shape.dim]
    if shape and shape[0] is None:
        shape[0] = 1  # onnx2tf fixes a dynamic batch to 1: the Edge TPU runs batch 1
    return ModelInput(inputs[0].name, shape, dtype)


def _check_ops(model, path: Path) -> None:
    """Refuse, naming the op and its node, what onnx2tf has no converter for (a custom domain, an op it lacks)."""
    _need("onnx2tf")  # its converters are looked up below: missing, it is named before anything is converted
    for node in model.graph.node:
        custom = node.domain not in ("", "ai.onnx")
        with recursion_limit_kept():  # finding onnx2tf.ops.X imports onnx2tf
            missing = custom or importlib.util.find_spec(f"onnx2tf.ops.{node.op_type}") is None
        if missing:
            where = f"domain {node.domain!r}, " if custom else ""
            raise ConfigError(f"{path}: ONNX op {node.op_type} ({where}node {node.name or '(unnamed)'!r}) is not one onnx2tf "
                              f"{_version('onnx2tf')} converts; expected standard ONNX ops (re-export without it, or "
                              "replace it in the source model)")


@contextlib.contextmanager
def recursion_limit_kept():
    """Python's recursion limit as it was, after what runs inside: importing onnx2tf sets it to the C int maximum, after
    which a deep recursion in C (json's decoder on a file nested 100,000 deep) overflows the stack and kills the process
    instead of raising RecursionError, the one-line refusal edge.files.bounded.loads_json gives."""
    limit = sys.getrecursionlimit()
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _through_tensorflow() -> dict:
    """onnx2tf 2.x writes .tflite files straight from its own graph by default, and no SavedModel; its TensorFlow
    path ("tf_converter", the only one 1.x has) writes the SavedModel our export quantizes."""
    return {"tflite_backend": "tf_converter"} if int(_version("onnx2tf").split(".")[0]) >= 2 else {}


ONNX2TF_RECURSION_LIMIT = 2_147_483_647  # what importing onnx2tf sets (1.29.24), for its recursive walks of the graph


def _convert(path: Path, folder: Path, overwrite, sample_images: Optional[np.ndarray], batch: Optional[int]) -> None:
    with recursion_limit_kept():  # onnx2tf's own limit holds for its conversion, and not after
        sys.setrecursionlimit(ONNX2TF_RECURSION_LIMIT)
        _convert_with_onnx2tf(path, folder, overwrite, sample_images, batch)


def _convert_with_onnx2tf(path: Path, folder: Path, overwrite, sample_images: Optional[np.ndarray], batch: Optional[int]) -> None:
    import onnx2tf

    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="edgeflow-onnx2tf-") as workdir:
        np.save(Path(workdir) / SAMPLE_NAME, _samples(sample_images))
        os.chdir(workdir)  # onnx2tf reads its sample file from the current directory
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log):
                onnx2tf.convert(input_onnx_file_path=str(Path(here, path)), output_folder_path=str(folder),
                                output_signaturedefs=True, batch_size=batch, overwrite_input_shape=overwrite,
                                not_use_onnxsim=True, non_verbose=True, **_through_tensorflow())
        except SystemExit as stop:  # onnx2tf ends with sys.exit(1) on a model it cannot convert
            raise ConfigError(f"onnx2tf {_version('onnx2tf')} could not convert {path} (exit {stop.code}): "
                              f"{_last_error(log.getvalue())}") from None
        except Exception as err:
            raise ConfigError(f"onnx2tf {_version('onnx2tf')} could not convert {path} ({type(err).__name__}: "
                              f"{str(err).splitlines()[0][:200] if str(err) else ''})") from None
        finally:
            os.chdir(here)
    if not (folder / "saved_model.pb").is_file():
        raise ConfigError(f"onnx2tf {_version('onnx2tf')} wrote no SavedModel for {path}: {_last_error(log.getvalue())}")


def _samples(images: Optional[np.ndarray]) -> np.ndarray:
    """The sample file onnx2tf wants: 20 images 128x128x3, float32 0..1, from the user's own pixels."""
    import tensorflow as tf

    if images is None or not len(images):
        raise ConfigError("no images to give onnx2tf as its sample data; expected --data with images")
    picked = np.resize(np.asarray(images), (SAMPLE_COUNT,) + np.asarray(images).shape[1:])  # repeated when fewer
    resized = tf.image.resize(tf.constant(picked, tf.float32), [SAMPLE_SIZE, SAMPLE_SIZE], antialias=True).numpy()
    return np.clip(resized / 255.0, 0.0, 1.0).astype(np.float32)


def _last_error(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR" in line or "Error" in line]
    return (errors[-1] if errors else (lines[-1] if lines else "no message"))[:300]


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "(not installed)"


def _reader() -> str:
    return f"onnx2tf {_version('onnx2tf')} (onnx {_version('onnx')})"
