"""The anchor-free detector as files: a float TFLite twin, or a full-integer int8 model whose every op the Edge TPU maps,
in Frigate's `yolo-generic` layout.

    data = convert(detector, image_size, labels, int8=True, calibration=images, name=..., record=...)

The model: Coral's uint8 input (scale 1/128, zero point 128: camera bytes go in unchanged, as the classifier and the
SSD detector take them), and two outputs, box distributions (1, N, 64) and class logits (1, N, C), with N the anchor
points of strides 8, 16, 32 (2,100 at 320x320). In the int8 model both outputs are int8. The class logits' grid is
pinned to scale 1/32 and zero point 0 ([-4, 3.97]): Frigate's reader subtracts the zero point from the int8 values in
int8 arithmetic, and any other zero point would wrap the top logits around; 1/32 spends the 256 levels on the
head's bounded (-4, 4). Decoding and NMS run on the host (edge/answers/heads/yolo.py). Metadata: the input's
normalization, the two outputs described, the labels on the class logits, the edgeflow record.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Iterable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.yolo.model import LOGIT_LIMIT, REG_MAX, anchor_count
from pipeline.errors import DataError
from pipeline.quant import convention
from pipeline.quant.convert import convert as convert_bytes
from pipeline.tasks.detect.converter import converter as make_converter
from pipeline.quant.verify import (VerificationError, edgetpu_version_problems, integer_only_problems, quantization_of,
                                   shape_problems)

LOGITS_SCALE = LOGIT_LIMIT / 128  # the int8 class logits' grid: -4 .. 127/32 with zero point 0
OUTPUT_KEYS = ("box_dist", "class_logits")


def serving_function(detector, image_size: int, int8: bool):
    """The batch-1 graph raw pixels [1, S, S, 3] float32 -> {box_dist, class_logits}; a concrete function."""

    @tf.function(input_signature=[tf.TensorSpec([1, image_size, image_size, 3], tf.float32, name="image")])
    def serve(image):
        out = detector(image, training=False)
        logits = out["class_logits"]
        if int8:
            # Pins the int8 output's grid (zero point 0); the converter takes it as the tensor's quantization.
            logits = tf.quantization.fake_quant_with_min_max_args(logits, min=-LOGIT_LIMIT, max=127 * LOGITS_SCALE, num_bits=8)
        return {"box_dist": out["box_dist"], "class_logits": logits}

    return serve.get_concrete_function()


def convert(detector, image_size: int, labels: Sequence[str], *, int8: bool, calibration: Optional[Iterable[np.ndarray]] = None,
            name: Optional[str] = None, record: Optional[dict] = None) -> bytes:
    """The detector as verified TFLite bytes with metadata (see the module docstring)."""
    from pipeline.tasks.detect.heads.yolo import metadata as yolo_detector

    labels = [str(x) for x in labels]
    if not labels:
        raise DataError("no class names; expected one label per class")
    if len(labels) == 4 * REG_MAX:
        raise DataError(f"{len(labels)} classes: a client tells the two outputs apart by shape, and the class logits would "
                        f"have the box distributions' {4 * REG_MAX} channels; expected another number of classes")
    concrete = serving_function(detector, image_size, int8)
    converter = make_converter(concrete, detector, image_size, int8=int8, calibration=calibration)
    if int8:
        converter.inference_output_type = tf.int8
    model = convert_bytes(converter)
    info = verify(model, image_size, len(labels), int8)
    mean, std = (convention.MEAN, convention.STD) if int8 else (0.0, 1.0)
    return yolo_detector.embed(model, labels, image_size, mean=mean, std=std, input_dtype="uint8" if int8 else "float32",
                               name=name or f"{detector.name} {'int8' if int8 else 'float32'}", roles=output_roles(info),
                               record=record)


def verify(model: bytes, image_size: int, num_classes: int, int8: bool):
    """Refuse a converted model that is not the layout: the two outputs' shapes and types, static batch-1 shapes, and
    for int8 integer-only ops at Edge TPU versions, Coral's input grid and the class logits' pinned grid."""
    from edge.model.tflite_file import read_model

    info = read_model(model)
    n = anchor_count(image_size)
    # Requantization inside the graph is allowed: an imported YOLOv8's neck feeds one tensor to two concatenations.
    problems = output_problems(info, [[1, n, 4 * REG_MAX], [1, n, num_classes]], "box distributions and class logits",
                               int8, requantize_ok=True)
    if problems:
        raise VerificationError("the converted detector failed verification; nothing was written:\n  " + "\n  ".join(problems))
    if int8:
        convention.check(quantization_of(info, info.inputs[0]), "uint8")
        logits = next(t for t in info.outputs if list(info.tensors[t].shape)[-1] == num_classes
                      and t != _box_output(info))
        q = quantization_of(info, logits)
        if abs(q["scale"] - LOGITS_SCALE) > 1e-9 or q["zero_point"] != 0:
            raise VerificationError(f"the class logits are quantized with scale {q['scale']!r}, zero point {q['zero_point']}; "
                                    f"expected {LOGITS_SCALE!r} and 0 (Frigate's reader subtracts the zero point in int8)")
    return info


def output_problems(info, expected: List[List[int]], what: str, int8: bool, requantize_ok: bool = False) -> List[str]:
    """What verify refuses, one line each: shapes not static batch 1, outputs not of the `expected` shapes (in any order)
    or not all int8 (float32 for the float twin), and for int8 float or mid-graph ops, op versions the Edge TPU compiler
    cannot parse, more than one subgraph."""
    problems = shape_problems(info)
    shapes = sorted([int(x) for x in info.tensors[t].shape] for t in info.outputs)
    if shapes != sorted(expected):
        problems.append(f"outputs {shapes}; expected {sorted(expected)} ({what})")
    dtypes = {info.tensors[t].dtype.lower() for t in info.outputs}
    if dtypes != {"int8" if int8 else "float32"}:
        problems.append(f"outputs are {sorted(dtypes)}; expected {'int8' if int8 else 'float32'}")
    if int8:
        problems += integer_only_problems(info, requantize_ok=requantize_ok) + edgetpu_version_problems(info)
        if info.num_subgraphs != 1:
            problems.append(f"model has {info.num_subgraphs} subgraphs, expected 1")
    return problems


def _box_output(info) -> int:
    return next(t for t in info.outputs if list(info.tensors[t].shape)[-1] == 4 * REG_MAX)


def output_roles(info) -> List[str]:
    """The subgraph's outputs in order, as "box_dist" or "class_logits" (by shape; the first 64-channel one is the boxes)."""
    box = _box_output(info)
    return ["box_dist" if t == box else "class_logits" for t in info.outputs]
