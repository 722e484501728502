"""The pose model in the layout Ultralytics' own reader takes, so `YOLO(file, task="pose")` reads it:

    data = convert(model, image_size, labels, calibration=images)

Ultralytics' LiteRT backend feeds its 0..1 image quantized by the input's grid when the input is int8 (it would set
floats into a uint8 input), dequantizes every int8 output, and reads one output [1, 4 + C + 3K, N]: per anchor point
the box (centre x, centre y, width, height) normalized to the input, C class scores (probabilities), then per keypoint
x and y normalized and its visibility probability; it scales the normalized coordinates by the image size itself. The
names, keypoint shape and task come from a zip appended to the flatbuffer holding `metadata.json`.

So this file has an int8 input on the grid 1/255, zero point -128 (0..1 to -128..127), and one int8 output on the same
grid, pinned to [0, 1]: every value in it lies there (a keypoint beyond the image's edge is read at the edge). The
decoding runs in the graph (serving_function): the box distributions' softmax over 16 bins cannot map (the Edge TPU
takes a softmax of one dimension only), so that softmax and what follows it (the boxes' corners, the concatenations,
the transpose: 18 of 97 ops of the default small_cnn model at 192 and 320 px, by the pre-flight) run on the CPU after
the Edge TPU segment, as in Ultralytics' own Edge TPU exports; the keypoints' decoding maps. edgeflow's own export
(export.py) keeps every op on the Edge TPU and decodes on the host.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import io
import json
import zipfile
from typing import Iterable, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.errors import DataError
from pipeline.quant.convert import convert as convert_bytes
from pipeline.quant.verify import VerificationError, quantization_of
from pipeline.tasks.detect.converter import calibration_array
from pipeline.tasks.detect.heads.yolo.export import output_problems
from pipeline.tasks.detect.heads.yolo.model import REG_MAX, STRIDES, anchor_count, anchor_points

GRID = (1 / 255, -128)  # the input's and the output's int8 grid: 0..1 in 256 steps


def serving_function(model, image_size: int):
    """The batch-1 graph: the 0..1 image [1, S, S, 3] -> [1, 4 + C + 3K, N] as the module docstring says.

    Every intermediate tensor is kept within the image's span, so that its int8 grid steps a fraction of a pixel: a
    side's expected distance weighs each bin by its distance capped at the input's side (the boxes are clipped to
    the image anyway), and a keypoint's offset is capped at the input's side before it is scaled by the stride."""
    centres, strides = anchor_points(image_size)
    n = len(centres)
    # [N, 16] each bin's distance in input sides, at most 1; [N, 1] the most strides an offset may span.
    weights = np.minimum(np.arange(REG_MAX, dtype=np.float32)[None] * strides[:, None], image_size) / image_size
    span = (image_size / strides)[:, None].astype(np.float32)
    centres, steps = centres / image_size, (strides / image_size)[:, None].astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([1, image_size, image_size, 3], tf.float32, name="images")])
    def serve(images):
        out = model(images * 255.0, training=False)  # the model takes raw pixels
        bins = tf.nn.softmax(tf.reshape(out["box_dist"], [1, n, 4, REG_MAX]), axis=-1)
        distance = tf.reduce_sum(bins * weights[None, :, None, :], axis=-1)  # [1, N, 4] in input sides
        corners = tf.clip_by_value(tf.concat([centres[None] - distance[..., :2], centres[None] + distance[..., 2:]], -1),
                                   0.0, 1.0)
        xywh = tf.concat([(corners[..., :2] + corners[..., 2:]) / 2, corners[..., 2:] - corners[..., :2]], axis=-1)
        scores = tf.sigmoid(out["class_logits"])
        raw = tf.reshape(out["keypoints"], [1, n, -1, 3])
        offsets = tf.clip_by_value(raw[..., :2], -span[None, :, :, None], span[None, :, :, None])
        xy = tf.clip_by_value(centres[None, :, None, :] + offsets * steps[None, :, :, None], 0.0, 1.0)
        # The sigmoid on the output as the model gives it (the converter leaves one after the reshape in float).
        visible = tf.reshape(tf.sigmoid(out["keypoints"]), [1, n, -1, 3])[..., 2:]
        points = tf.concat([xy, visible], axis=-1)
        joined = tf.concat([xywh, scores, tf.reshape(points, [1, n, -1])], axis=-1)
        # Pins the output's grid to [0, 1]; the converter takes it as the tensor's quantization.
        joined = tf.quantization.fake_quant_with_min_max_args(joined, min=0.0, max=1.0, num_bits=8)
        return {"output0": tf.transpose(joined, [0, 2, 1])}

    return serve.get_concrete_function()


def convert(model, image_size: int, labels: Sequence[str], *, calibration: Optional[Iterable[np.ndarray]] = None,
            name: str = "edgeflow pose") -> bytes:
    """The int8 file Ultralytics' reader takes, verified, with Ultralytics' metadata appended."""
    labels = [str(x) for x in labels]
    if not labels:
        raise DataError("no class names; expected one label per class")
    images = calibration_array(calibration, image_size)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([serving_function(model, image_size)], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([image[None].astype(np.float32) / 255.0] for image in images)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    data = convert_bytes(converter)
    num_keypoints = int(model.output_shape["keypoints"][-1]) // 3
    verify(data, image_size, len(labels), num_keypoints)
    return data + metadata_zip(labels, image_size, num_keypoints, name)


def verify(model: bytes, image_size: int, num_classes: int, num_keypoints: int) -> None:
    """Refuse a file Ultralytics would read wrong: the one output's shape, int8 in and out, static batch-1 shapes,
    integer-only ops at Edge TPU versions, and both grids."""
    from edge.model.tflite_file import read_model

    info = read_model(model)
    shape = [1, 4 + num_classes + 3 * num_keypoints, anchor_count(image_size)]
    # Requantization inside the graph is allowed: the decoded parts meet in one concatenation of one grid.
    problems = output_problems(info, [shape], "Ultralytics' one output: box, class scores, keypoints", int8=True,
                               requantize_ok=True)
    if info.tensors[info.inputs[0]].dtype.lower() != "int8":
        problems.append(f"input is {info.tensors[info.inputs[0]].dtype.lower()}; expected int8 (Ultralytics quantizes "
                        "its input only into an int8 or int16 one)")
    for what, index in (("input", info.inputs[0]), ("output", info.outputs[0] if info.outputs else None)):
        if index is None or problems:
            continue
        q = quantization_of(info, index)
        if abs(q["scale"] - GRID[0]) > 1e-6 or q["zero_point"] != GRID[1]:
            problems.append(f"the {what} is quantized with scale {q['scale']!r}, zero point {q['zero_point']}; expected "
                            f"1/255 and {GRID[1]} (0..1)")
    if problems:
        raise VerificationError("the converted pose model for Ultralytics failed verification; nothing was written:\n  "
                                + "\n  ".join(problems))


def metadata_zip(labels: Sequence[str], image_size: int, num_keypoints: int, name: str) -> bytes:
    """The zip Ultralytics' reader opens at the end of a .tflite file: metadata.json with the task, class names,
    keypoint shape and input size."""
    metadata = {"description": name, "author": "edgeflow", "task": "pose", "stride": max(STRIDES), "batch": 1,
                "imgsz": [image_size, image_size], "channels": 3, "names": dict(enumerate(labels)),
                "kpt_shape": [num_keypoints, 3]}
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("metadata.json", json.dumps(metadata))
    return packed.getvalue()
