"""What the host side of the Ultralytics benchmarks (side_by_side.py, pose.py) shares: the calibration sample
onnx2tf would download, and an Ultralytics .tflite file read as Ultralytics' LiteRT backend reads it.

    from bench.importing.yolo.ultralytics_files import raw_output, write_onnx2tf_sample
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

# What onnx2tf reads from its working folder instead of downloading it: 20 RGB images, 128 x 128, 0..1.
SAMPLE_NAME = "calibration_image_sample_data_20x128x128x3_float32.npy"


def write_onnx2tf_sample(folder: Path, images) -> Path:
    """onnx2tf's calibration sample made from the first 20 of `images` (PIL images), in `folder` (the Edge TPU export's
    working folder)."""
    from PIL import Image

    sample = np.stack([np.asarray(image.convert("RGB").resize((128, 128), Image.BILINEAR), np.float32) / 255.0
                       for image in list(images)[:20]])
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / SAMPLE_NAME, sample.astype(np.float32))
    return folder / SAMPLE_NAME


def raw_output(interpreter, image: np.ndarray) -> np.ndarray:
    """An Ultralytics .tflite file's one output on uint8 pixels [S, S, 3], as its LiteRT backend feeds and reads it: the
    input 0..1 (NCHW where the file wants it), quantized where it is int8 or int16; the output dequantized likewise.
    Returns the output's first batch item, (4 + C [+ 3K], N), coordinates as the file gives them."""
    given = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    x = np.asarray(image, np.float32)[None] / 255.0
    if int(given["shape"][1]) == 3:
        x = x.transpose(0, 3, 1, 2)
    if np.dtype(given["dtype"]) in (np.int8, np.int16):
        scale, zero = given["quantization"]
        limits = np.iinfo(given["dtype"])
        x = np.clip(x / scale + zero, limits.min, limits.max)  # truncated by astype, as the backend does
    interpreter.set_tensor(given["index"], x.astype(given["dtype"]))
    interpreter.invoke()
    y = interpreter.get_tensor(out["index"]).astype(np.float32)
    if np.dtype(out["dtype"]) in (np.int8, np.int16):
        scale, zero = out["quantization"]
        y = (y - zero) * scale
    return y[0]
