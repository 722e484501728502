"""Checks that an int8 .tflite model is integer-only, static, batch 1 and inside edgetpu_compiler 16's op versions.

`pipeline export --int8` runs `verify_int8` on the converted bytes before anything is written: a model
that fails is refused with every offending op named (index, name, what is wrong). The model is read
with `edge.model.tflite_file` (no TensorFlow), the same reader the device side uses.

One float op is allowed, and only at the end: a detector's `TFLite_Detection_PostProcess` (anchor decoding
and non-maximum suppression) writing the model's outputs, with the DEQUANTIZE ops that feed it. It is
what every Edge TPU detector ends in (Google's SSD and EfficientDet-Lite models), the Edge TPU has no such
operation, and it runs on the CPU after everything the Edge TPU runs, so it splits nothing; its outputs
(boxes, class ids, scores, count) are float32 by the op's definition.
"""
from __future__ import annotations

from typing import Dict, List, Set, Tuple

from pipeline.edgetpu import rules as edgetpu_rules
from pipeline.errors import PipelineError

# Integer-only means these tensor types and no others. int32 carries biases and shape/axis operands;
# int16 is refused too: the Edge TPU has no 16-bit path, and 16x8 quantization is not what we asked for.
INTEGER_DTYPES = ("int8", "uint8", "int32")
POSTPROCESS_OP = "TFLite_Detection_PostProcess"  # the one float op allowed, at the end (see the docstring)


class VerificationError(PipelineError):
    """The converted model is not what the Edge TPU needs; the message lists each offending op."""


def _tensor_label(info, index: int) -> str:
    tensor = info.tensors[index]
    return f"tensor {index} {tensor.name!r} ({tensor.dtype.lower()})"


def postprocess_tail(info) -> Set[int]:
    """Indices of the ops that form a detector's float tail: the post-processing op when it is the last op and
    writes every model output, and the DEQUANTIZE ops whose only reader it is. Empty for any other model."""
    if not info.ops:
        return set()
    last = info.ops[-1]
    if last.name != POSTPROCESS_OP or not last.is_custom or sorted(last.outputs) != sorted(info.outputs):
        return set()
    readers: Dict[int, Set[int]] = {}
    for op in info.ops:
        for t in op.inputs:
            readers.setdefault(t, set()).add(op.index)
    tail = {last.index}
    for op in info.ops[:-1]:
        if (op.name == "DEQUANTIZE" and op.outputs and all(readers.get(t) == {last.index} for t in op.outputs)
                and op.outputs[0] not in info.outputs):
            tail.add(op.index)
    return tail


def integer_only_problems(info, requantize_ok: bool = False) -> List[str]:
    """One line per offending op or tensor: float or int16 types, mid-graph (de)quantization, dynamic shapes, batch != 1.
    A detector's post-processing tail (postprocess_tail) is allowed. `requantize_ok`: an int8 -> int8 QUANTIZE inside
    the graph is allowed too (the converter's requantization of a tensor that feeds two concatenations of different
    scales, as YOLOv8's neck has; the Edge TPU compiler maps QUANTIZE since its version 2.0)."""
    problems: List[str] = []
    graph_inputs, graph_outputs = set(info.inputs), set(info.outputs)
    tail = postprocess_tail(info)
    for op in info.ops:
        if op.index in tail:
            continue
        where = f"op {op.index} {op.name}"
        for role, indices in (("input", op.inputs), ("output", op.outputs)):
            for t in indices:
                if t < 0:  # optional operand left out
                    continue
                dtype = info.tensors[t].dtype.lower()
                if dtype not in INTEGER_DTYPES:
                    problems.append(f"{where}: {role} {_tensor_label(info, t)} is {dtype}, expected one of {', '.join(INTEGER_DTYPES)}")
        if op.name == "DEQUANTIZE":
            problems.append(f"{where}: DEQUANTIZE produces float; an integer-only model has none")
        elif op.name == "QUANTIZE":
            # The converter puts a QUANTIZE right after a uint8 input (uint8 -> int8) and right before a
            # uint8 output (int8 -> uint8): that is how uint8 I/O reaches an int8 graph, and it is fine.
            # Anywhere else it is a requantization inside the graph, which splits the Edge TPU's mapping.
            src, dst = info.tensors[op.inputs[0]], info.tensors[op.outputs[0]]
            at_edge = op.inputs[0] in graph_inputs or op.outputs[0] in graph_outputs
            is_io_cast = {src.dtype.lower(), dst.dtype.lower()} == {"uint8", "int8"}
            requantized = requantize_ok and src.dtype.lower() == dst.dtype.lower() == "int8"
            if not (at_edge and is_io_cast) and not requantized:
                problems.append(
                    f"{where}: QUANTIZE {src.dtype.lower()} -> {dst.dtype.lower()} in the middle of the graph; "
                    f"expected only uint8<->int8 right after an input or right before an output"
                )
    return problems + shape_problems(info)


def shape_problems(info) -> List[str]:
    """Dynamic dimensions anywhere, or a batch other than 1 on an input or output (the Edge TPU needs batch 1)."""
    from edge.model.tflite_file import dynamic_tensors

    problems = [f"{_tensor_label(info, t.index)} has dynamic shape {list(t.shape_signature)}, expected static shapes"
                for t in dynamic_tensors(info)]
    for role, indices in (("input", info.inputs), ("output", info.outputs)):
        for t in indices:
            shape = list(info.tensors[t].shape)
            if not shape or shape[0] != 1:
                problems.append(f"model {role} {_tensor_label(info, t)} has shape {shape}, expected batch 1")
    return problems


def edgetpu_version_problems(info) -> List[str]:
    """Ops whose version edgetpu_compiler 16 refuses to parse, with the layer (output tensor) they came from."""
    from edge.model.tflite_file import ops_over_version

    problems = []
    for op, limit in ops_over_version(info, edgetpu_rules.MAX_PARSED_VERSION):  # one table, owned by the compile stage's rules
        layer = info.tensors[op.outputs[0]].name if op.outputs else "?"
        problems.append(f"op {op.index} {op.name} v{op.version} (layer {layer!r}): edgetpu_compiler 16 accepts {op.name} up to v{limit}")
    return problems


def verify_static(model: bytes):
    """Read a float/float16/dynamic-range model back and refuse dynamic shapes or batch != 1; returns its ModelInfo."""
    from edge.model.tflite_file import read_model

    info = read_model(model)
    problems = shape_problems(info)
    if problems:
        raise VerificationError("the converted model failed verification; nothing was written:\n  " + "\n  ".join(problems))
    return info


def verify_int8(model: bytes, io_dtype: str):
    """Read `model` and refuse it unless it is integer-only, static, batch 1, Edge-TPU-versioned, with `io_dtype` I/O.

    Returns the parsed ModelInfo on success.
    """
    from edge.model.tflite_file import read_model

    info = read_model(model)
    problems = []
    if info.num_subgraphs != 1:
        problems.append(f"model has {info.num_subgraphs} subgraphs, expected 1")
    tail = postprocess_tail(info)
    for role, indices in (("input", info.inputs), ("output", info.outputs)):
        for t in indices:
            expected = "float32" if role == "output" and tail else io_dtype  # the post-processing op writes float
            if info.tensors[t].dtype.lower() != expected:
                problems.append(f"model {role} {_tensor_label(info, t)} is {info.tensors[t].dtype.lower()}, expected {expected}")
    problems += integer_only_problems(info)
    problems += edgetpu_version_problems(info)
    if problems:
        raise VerificationError(
            f"the int8 model failed verification ({len(problems)} problem(s)); nothing was written:\n  " + "\n  ".join(problems)
        )
    return info


def quantization_of(info, index: int) -> Dict[str, object]:
    """{"dtype", "scale", "zero_point"} of one tensor (per-tensor: I/O tensors carry one scale)."""
    tensor = info.tensors[index]
    scales, zero_points = list(tensor.scales or ()), list(tensor.zero_points or ())
    if len(scales) != 1 or len(zero_points) != 1:
        raise VerificationError(
            f"{_tensor_label(info, index)} has {len(scales)} scale(s) and {len(zero_points)} zero point(s), expected one of each"
        )
    return {"dtype": tensor.dtype.lower(), "scale": float(scales[0]), "zero_point": int(zero_points[0])}


def per_channel_tensors(info) -> List[Tuple[int, str, int]]:
    """(index, name, number of scales) of each tensor quantized per channel."""
    return [(t.index, t.name, len(t.scales)) for t in info.tensors if t.scales is not None and len(t.scales) > 1]
