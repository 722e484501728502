"""What the cost of an int8 .tflite depends on, op by op, read from the file: multiply-accumulates, parameter bytes as
the Edge TPU lays them out, activation bytes, and which side (Edge TPU or CPU) the pre-flight puts each op on.

A latency does not depend on weight values, only on shapes, so everything here comes from tensor shapes and the
pre-flight's mapping; the flatbuffer is read once through edge/model/tflite_file.py.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from edge.model.tflite_file import ModelInfo, OpInfo

# Ops that multiply by a constant weight tensor: the work of a systolic array.
MATMUL_OPS = ("CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")
DEPTHWISE = "DEPTHWISE_CONV_2D"
_BYTES = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "float32": 4, "int64": 8, "float16": 2, "bool": 1}


class OpCost(NamedTuple):
    index: int
    op: str
    on_edgetpu: bool
    tail: bool  # a detector's post-processing, on the CPU by design
    macs: int  # multiply-accumulates of a convolution or fully-connected op
    depthwise_macs: int  # multiply-accumulates of a depthwise convolution (a poor fit for a systolic array)
    parameter_bytes: int  # constant bytes as the Edge TPU's compiled layout holds them (layout.py)
    activation_bytes: int  # bytes of the op's outputs
    weight_shape: Tuple[int, ...] = ()  # the constant weight tensor's shape (conv, depthwise, fully connected), else ()


class ModelCost(NamedTuple):
    ops: List[OpCost]
    input_bytes: int  # what the host sends per inference
    output_bytes: int  # what it reads back

    def total(self, field: str, on_edgetpu: Optional[bool] = None) -> int:
        return sum(getattr(o, field) for o in self.ops if on_edgetpu is None or o.on_edgetpu == on_edgetpu)


def tensor_bytes(info: ModelInfo, index: int) -> int:
    if index < 0:
        return 0
    t = info.tensor(index)
    n = 1
    for d in t.shape:
        n *= max(int(d), 1)
    return n * _BYTES.get(t.dtype, 1)


def _shape(info: ModelInfo, index: int) -> tuple:
    return tuple(int(d) for d in info.tensor(index).shape) if index >= 0 else ()


def _spatial(shape: tuple) -> int:
    """Height x width of an NHWC activation (1 for a vector)."""
    return shape[1] * shape[2] if len(shape) == 4 else 1


def op_macs(op: OpInfo, info: ModelInfo) -> tuple:
    """(matmul MACs, depthwise MACs) of one op from its tensor shapes; (0, 0) for any op without weights."""
    if len(op.inputs) < 2 or not op.outputs:
        return 0, 0
    if op.name == "TRANSPOSE_CONV":  # inputs: output shape, weights [oc, kh, kw, ic], input
        if len(op.inputs) < 3:
            return 0, 0
        w, x = _shape(info, op.inputs[1]), _shape(info, op.inputs[2])
        return (_spatial(x) * w[0] * w[1] * w[2] * w[3], 0) if len(w) == 4 else (0, 0)
    w, y = _shape(info, op.inputs[1]), _shape(info, op.outputs[0])
    if op.name == "CONV_2D" and len(w) == 4:  # weights [oc, kh, kw, ic]
        return _spatial(y) * w[0] * w[1] * w[2] * w[3], 0
    if op.name == DEPTHWISE and len(w) == 4:  # weights [1, kh, kw, c]
        return 0, _spatial(y) * w[1] * w[2] * w[3]
    if op.name == "FULLY_CONNECTED" and len(w) == 2:  # weights [out, in]
        rows = 1
        for d in y[:-1]:
            rows *= max(d, 1)
        return rows * w[0] * w[1], 0
    return 0, 0


def model_cost(info: ModelInfo, rows: Iterable, layout_bytes) -> ModelCost:
    """Per-op costs; `rows` are the pre-flight's predictions (index, on_edgetpu, tail), `layout_bytes(op, info)` the
    compiled parameter bytes of an op."""
    placed: Dict[int, tuple] = {r.index: (r.on_edgetpu, r.tail) for r in rows}
    ops = []
    for op in info.ops:
        on_tpu, tail = placed.get(op.index, (False, False))
        macs, dw = op_macs(op, info)
        weights = _shape(info, op.inputs[1]) if (op.name in MATMUL_OPS or op.name == DEPTHWISE) and len(op.inputs) > 1 else ()
        ops.append(OpCost(op.index, op.name, on_tpu, tail, macs, dw, layout_bytes(op, info),
                          sum(tensor_bytes(info, t) for t in op.outputs), weights))
    return ModelCost(ops, sum(tensor_bytes(info, t) for t in info.inputs), sum(tensor_bytes(info, t) for t in info.outputs))
