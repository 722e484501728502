"""The int8 model's input wrapper gives the SavedModel every byte back unchanged: all 256 values, on real exports.

`pipeline export --int8` converts a wrapper (pipeline/quant/convention.py) whose input is Coral's grid
(uint8, scale 1/128, zero point 128; int8 I/O: zero point 0) and which computes the raw pixel again for the
SavedModel. Here a tiny trained run is exported through the stage itself, every byte value is fed, and the
wrapper's output tensor (the SavedModel's input inside the TFLite model) is read with the interpreter's
`experimental_preserve_all_tensors` and dequantized: it must be the pixel value itself.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.host

LEVELS = np.arange(256)


def _wrapper_output(interpreter) -> int:
    """Index of the wrapper's last tensor: from the model's input through an optional QUANTIZE (uint8 to int8),
    then its MUL and ADD, each taking the previous op's output."""
    ops = interpreter._get_ops_details()
    current = interpreter.get_input_details()[0]["index"]
    chain = []
    for op in ops:
        if current not in op["inputs"]:
            continue
        chain.append(op["op_name"])
        current = op["outputs"][0]
        if chain in (["MUL", "ADD"], ["QUANTIZE", "MUL", "ADD"]):
            return current
    raise AssertionError(f"no input wrapper (MUL, then ADD) after the input; ops from the input: {chain}")


def _bytes_through_the_wrapper(model_path):
    """(the model's input details, the wrapper's output as real values for each image, the images fed)."""
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_path=str(model_path), experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    details = interpreter.get_input_details()[0]
    out = _wrapper_output(interpreter)
    out_details = next(t for t in interpreter.get_tensor_details() if t["index"] == out)
    scale, zero_point = out_details["quantization"]
    shape = tuple(details["shape"])
    per_image = int(np.prod(shape))
    images, seen = [], []
    # Every byte value in every channel: consecutive values laid over the image, as many images as it takes.
    for start in range(0, 256 * 3, per_image):
        pixels = ((np.arange(per_image) + start) % 256).reshape(shape).astype(np.uint8)
        fed = pixels if details["dtype"] == np.uint8 else (pixels.astype(np.int16) - 128).astype(np.int8)
        interpreter.set_tensor(details["index"], fed)
        interpreter.invoke()
        raw = interpreter.get_tensor(out)
        images.append(pixels)
        seen.append((raw.astype(np.int64) - zero_point) * scale)
    return details, np.concatenate([x.reshape(-1) for x in seen]), np.concatenate([p.reshape(-1) for p in images])


def _check_every_byte_passes(model_path, dtype, zero_point):
    details, values, pixels = _bytes_through_the_wrapper(model_path)
    assert details["dtype"] == dtype and details["quantization"] == (1 / 128, zero_point)
    by_channel = pixels.reshape(-1, 3)
    assert all(set(by_channel[:, c].tolist()) == set(LEVELS.tolist()) for c in range(3)), "not every byte in every channel"
    off = sorted({int(p) for p, v in zip(pixels, values) if v != p})
    assert not off, f"{len(off)} of 256 byte values reach the SavedModel changed, e.g. {off[:10]}"


def test_every_byte_reaches_the_savedmodel_unchanged_uint8(exported_run):
    _check_every_byte_passes(exported_run / "model_int8.tflite", np.uint8, 128)


def test_every_byte_reaches_the_savedmodel_unchanged_int8_io(exported_run, tmp_path):
    from pipeline import export

    run_dir = tmp_path / "run"
    shutil.copytree(exported_run, run_dir)
    export.export_model(export.ExportConfig(mode=export.Mode.INT8, io_type="int8", debug_samples=2), run_dir)
    _check_every_byte_passes(run_dir / "model_int8.tflite", np.int8, 0)
