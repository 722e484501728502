"""Parity's reference for an imported run: the model as the user gave it (RUN/original/), run by its own library
and fed the same pixels through the recorded input contract, so the report says what the Coral loses against the
model the user brought, not against edgeflow's conversion of it.

    keras       Keras 3 on the .keras / .h5 file
    savedmodel  TensorFlow on the SavedModel folder's serving_default
    onnx        onnxruntime on the .onnx file

A task whose imported models need more than scores (a detector's boxes) runs the original through `checked`,
`input_contract` and `onnx_runner` and reads the answers its own way (pipeline/tasks/<task>/).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import numpy as np

from edge.pixels.preprocess import normalization
from pipeline.errors import ManifestError
from pipeline.importing.contract import InputContract

BATCH = 64


def describe(origin: Dict[str, Any]) -> str:
    """One line naming the reference, for the report."""
    runner = {"keras": "Keras", "savedmodel": "TensorFlow", "onnx": "onnxruntime"}.get(origin.get("format"), "?")
    return f"the imported model as given ({origin.get('copy')}, run by {runner})"


def scores(run_dir: Path, origin: Dict[str, Any], images: np.ndarray) -> np.ndarray:
    """The original model's scores [N, classes] of uint8 pixels [N, S, S, 3], checked against the recorded sha256."""
    path = checked(run_dir, origin)
    contract = input_contract(origin)
    run = {"keras": _keras, "savedmodel": _saved_model, "onnx": onnx_runner}[origin["format"]](path, origin)
    from pipeline.importing.wrap import prepare

    out = [np.asarray(run(prepare(images[i:i + BATCH].astype(np.float32), contract)), np.float32)
           for i in range(0, len(images), BATCH)]
    return np.concatenate(out)


def checked(run_dir: Path, origin: Dict[str, Any]) -> Path:
    """The copy of the original in RUN, checked against the sha256 recorded at import."""
    from pipeline.rundir.files import sha256_of

    path = Path(run_dir) / origin["copy"]
    if not path.exists() or sha256_of(path) != origin["sha256"]:
        raise ManifestError(f"{path} is missing or changed since `pipeline import` (sha256 {str(origin['sha256'])[:12]}…); "
                            "expected the imported model as it was recorded: import it again")
    return path


def input_contract(origin: Dict[str, Any]) -> InputContract:
    rec = origin["input_contract"]
    norm = normalization(rec["mean"], rec["std"], rec["normalization"])
    return InputContract(rec["image_size"], rec["layout"], norm, rec["channel_order"], rec["fit"], rec["from"])


def _keras(path: Path, origin):
    from pipeline.importing.keras_file import load

    model = load(path)
    return lambda x: model.predict_on_batch(x)


def _saved_model(path: Path, origin):
    import tensorflow as tf

    fn = tf.saved_model.load(str(path)).signatures["serving_default"]
    name = origin["input_name"]
    return lambda x: next(iter(fn(**{name: tf.constant(x)}).values())).numpy()


def onnx_runner(path: Path, origin):
    """x -> the ONNX file's first output, in onnxruntime (one image at a time for a batch-1 model)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    fixed = origin["input_shape"][0] == 1
    if fixed:  # a batch-1 model: one image at a time
        return lambda x: np.concatenate([session.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])
    return lambda x: session.run(None, {name: x})[0]
