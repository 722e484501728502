"""The imported model behind edgeflow's pixel contract: a SavedModel whose input is raw RGB pixels 0..255
[batch, S, S, 3] float32, with the model's own input preparation inside the graph (channel order, normalization,
layout), so every later stage (export, calibration, parity, predict, edge) feeds it as it feeds a trained model."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.importing.contract import InputContract


def prepare(images, contract: InputContract):
    """Pixels 0..255 [N, S, S, 3] (RGB) as the model takes them: reordered, normalized, laid out. Works on NumPy arrays
    and on tensors alike (the reference runs it in NumPy, the wrapper in the graph)."""
    x = images
    if contract.channel_order == "bgr":
        x = x[..., ::-1] if isinstance(x, np.ndarray) else _reversed_channels(x)
    mean = np.asarray(contract.norm.mean, np.float32)
    std = np.asarray(contract.norm.std, np.float32)
    if (mean != 0).any():
        x = x - mean
    if (std != 1).any():
        x = x * (1.0 / std)  # a multiply: the Edge TPU has MUL, and it folds into the first layer's quantization
    if contract.layout == "nchw":
        x = x.transpose(0, 3, 1, 2) if isinstance(x, np.ndarray) else _transpose_nchw(x)
    return x


def _reversed_channels(x):
    """RGB to BGR as SPLIT and CONCATENATION, which the Edge TPU runs (a slice with stride -1 it does not)."""
    import tensorflow as tf

    return tf.concat(tf.split(x, 3, axis=-1)[::-1], axis=-1)


def _transpose_nchw(x):
    import tensorflow as tf

    return tf.transpose(x, [0, 3, 1, 2])


def write(source: Path, contract: InputContract, folder: Path, batch=None, layout=None) -> None:
    """A SavedModel in `folder` whose serving_default takes raw pixels and returns the scores of the SavedModel at
    `source` (its serving_default), fed as `contract` says. `batch`: the source's fixed batch, or None for any;
    `layout`: the source's own layout when a conversion changed the original's (ONNX NCHW converted to NHWC)."""
    from dataclasses import replace

    import tensorflow as tf

    if layout is not None:
        contract = replace(contract, layout=layout)

    inner = tf.saved_model.load(str(source))
    fn = inner.signatures["serving_default"]
    _, specs = fn.structured_input_signature
    (in_name, _), = specs.items()
    (out_name,) = fn.structured_outputs
    size = contract.image_size

    class Imported(tf.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner  # tracked: its variables are saved with the wrapper

        @tf.function(input_signature=[tf.TensorSpec([batch, size, size, 3], tf.float32, name="image")])
        def serve(self, image):
            return {"scores": fn(**{in_name: prepare(image, contract)})[out_name]}

    module = Imported()
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.serve})
