"""The pose model as files: a float TFLite twin, or a full-integer int8 model whose every op the Edge TPU maps.

    data = convert(model, image_size, labels, int8=True, calibration=images, name=..., record=...)

As the YOLO detector's export (pipeline/tasks/detect/heads/yolo/export.py, whose converter set-up this reuses): Coral's
uint8 input (scale 1/128, zero point 128), the box distributions (1, N, 64) and class logits (1, N, C), plus keypoints
(1, N, 3K), in that order; in the int8 model all three int8. Two output grids are pinned: the class logits' as the
detector's (scale 1/32, zero point 0, [-4, 3.97]) and the keypoints' to scale 1/8, zero point 0 ([-16, 15.875]): the
model bounds offsets (in strides) and visibility logits to (-16, 16), and calibration would otherwise set the grid by
whatever range the calibration images happened to reach. Decoding and NMS run on the host
(edge/answers/heads/keypoints.py). Metadata: the input's normalization, the three outputs described (the keypoint
count in the keypoints' description), the labels on the class logits, the edgeflow record.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.errors import DataError
from pipeline.quant import convention
from pipeline.quant.convert import convert as convert_bytes
from pipeline.quant.verify import VerificationError, quantization_of
from pipeline.tasks.detect.converter import converter as make_converter
from pipeline.tasks.detect.heads.yolo.export import LOGITS_SCALE, output_problems
from pipeline.tasks.detect.heads.yolo.model import LOGIT_LIMIT, REG_MAX, anchor_count
from pipeline.tasks.pose.heads.yolo.model import KEYPOINT_LIMIT

KEYPOINTS_SCALE = KEYPOINT_LIMIT / 128  # the int8 keypoints' grid: -16 .. 127/8 with zero point 0
ROLES = ("box_dist", "class_logits", "keypoints")


def serving_function(model, image_size: int, int8: bool):
    """The batch-1 graph raw pixels [1, S, S, 3] float32 -> {box_dist, class_logits, keypoints}; a concrete function."""

    @tf.function(input_signature=[tf.TensorSpec([1, image_size, image_size, 3], tf.float32, name="image")])
    def serve(image):
        out = model(image, training=False)
        logits, points = out["class_logits"], out["keypoints"]
        if int8:
            # Pin the int8 outputs' grids (zero point 0); the converter takes them as the tensors' quantization.
            logits = tf.quantization.fake_quant_with_min_max_args(logits, min=-LOGIT_LIMIT, max=127 * LOGITS_SCALE, num_bits=8)
            points = tf.quantization.fake_quant_with_min_max_args(points, min=-KEYPOINT_LIMIT, max=127 * KEYPOINTS_SCALE,
                                                                  num_bits=8)
        return {"box_dist": out["box_dist"], "class_logits": logits, "keypoints": points}

    return serve.get_concrete_function()


def convert(model, image_size: int, labels: Sequence[str], *, int8: bool, calibration: Optional[Iterable[np.ndarray]] = None,
            name: Optional[str] = None, record: Optional[dict] = None) -> bytes:
    """The pose model as verified TFLite bytes with metadata (see the module docstring)."""
    from pipeline.tasks.pose.heads.yolo import metadata

    labels = [str(x) for x in labels]
    num_keypoints = int(model.output_shape["keypoints"][-1]) // 3
    refuse_classes(len(labels), num_keypoints)
    concrete = serving_function(model, image_size, int8)
    converter = make_converter(concrete, model, image_size, int8=int8, calibration=calibration)
    if int8:
        converter.inference_output_type = tf.int8
    data = convert_bytes(converter)
    info = verify(data, image_size, len(labels), num_keypoints, int8)
    mean, std = (convention.MEAN, convention.STD) if int8 else (0.0, 1.0)
    return metadata.embed(data, labels, image_size, num_keypoints, mean=mean, std=std,
                          input_dtype="uint8" if int8 else "float32",
                          name=name or f"{model.name} {'int8' if int8 else 'float32'}", roles=output_roles(data, info),
                          record=record)


def refuse_classes(num_classes: int, num_keypoints: int) -> None:
    """Class counts a reader could not tell from the other outputs by shape."""
    if not num_classes:
        raise DataError("no class names; expected one label per class")
    if num_classes == 4 * REG_MAX:
        raise DataError(f"{num_classes} classes: a reader tells the outputs apart by shape, and the class logits would have "
                        f"the box distributions' {4 * REG_MAX} channels; expected another number of classes")
    if num_classes == 3 * num_keypoints:
        raise DataError(f"{num_classes} classes with {num_keypoints} keypoints: the class logits would have the keypoints' "
                        f"{3 * num_keypoints} channels, and a reader tells the outputs apart by shape; expected another "
                        "number of classes")


def verify(model: bytes, image_size: int, num_classes: int, num_keypoints: int, int8: bool):
    """Refuse a converted model that is not the layout: the three outputs' shapes and types, each where the device's
    decoding finds it by shape (checked against the file's signature, which names them), static batch-1 shapes, and for
    int8 integer-only ops at Edge TPU versions, Coral's input grid and the two pinned output grids."""
    from edge.model.tflite_file import read_model

    info = read_model(model)
    n = anchor_count(image_size)
    # Requantization inside the graph is allowed, as for the detector: an imported YOLOv8-pose's neck feeds one tensor
    # to two concatenations.
    problems = output_problems(info, [[1, n, 4 * REG_MAX], [1, n, num_classes], [1, n, 3 * num_keypoints]],
                               "box distributions, class logits, keypoints", int8, requantize_ok=True)
    if not problems:
        named, found = signature_roles(model), shape_roles(model)
        if named != found:
            problems.append(f"the outputs by the file's signature are {named}, but a reader telling them apart by shape "
                            f"finds {found}; expected the same tensors")
    if problems:
        raise VerificationError("the converted pose model failed verification; nothing was written:\n  " + "\n  ".join(problems))
    if int8:
        convention.check(quantization_of(info, info.inputs[0]), "uint8")
        for role, scale, limit in (("class_logits", LOGITS_SCALE, LOGIT_LIMIT), ("keypoints", KEYPOINTS_SCALE, KEYPOINT_LIMIT)):
            q = quantization_of(info, named[role])
            if abs(q["scale"] - scale) > 1e-9 or q["zero_point"] != 0:
                raise VerificationError(f"the {role} output is quantized with scale {q['scale']!r}, zero point "
                                        f"{q['zero_point']}; expected {scale!r} and 0 (the grid of the graph's bound "
                                        f"({-limit:g}, {limit:g}))")
    return info


def _interpreter(model: bytes):
    from edge.model.interpreter import make_interpreter

    return make_interpreter(model, edgetpu=False)


def signature_roles(model: bytes) -> Dict[str, int]:
    """The output tensor of each role by the file's serving signature (the serving function's dict keys)."""
    signatures = _interpreter(model)._get_full_signature_list() or {}
    outputs = next(iter(signatures.values()), {}).get("outputs", {}) if len(signatures) == 1 else {}
    return {role: int(outputs[role]) for role in ROLES if role in outputs}


def shape_roles(model: bytes) -> Dict[str, int]:
    """The output tensor of each role as the device's decoding finds it, by shape (edge/answers/heads/keypoints.py)."""
    from edge.answers.heads.keypoints import find_layout, roles

    layout = find_layout(_interpreter(model))
    return {} if layout is None else roles(layout)


def output_roles(model: bytes, info) -> List[str]:
    """The subgraph's outputs in order, by role (as the device's decoding finds them; verify has checked them)."""
    by_index = {index: role for role, index in shape_roles(model).items()}
    return [by_index[t] for t in info.outputs]
