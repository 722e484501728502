"""Which quantization parameters an operator's kernels accept, checked before an interpreter sees them.

    problem = operator_problem(builtin, inputs, outputs)   # None, or what is wrong (a sentence)

An int8 model whose scales break these rules does not fail politely: XNNPACK (the CPU interpreters' default
delegate) refuses to prepare the node and the interpreter then aborts in its clean-up ("double free or
corruption", SIGABRT), and the reference kernels abort on a requantization multiplier out of range. Measured with
tests/edge/tests.support.quant_mutants.py on ai-edge-litert 2.3.0. Two kinds of rule:

- TFLite's int8 quantization specification: operators that move values without arithmetic keep their input's
  scale and zero point; softmax, logistic and tanh have a fixed output scale and zero point.
- XNNPACK's requantization ranges (the ratio of input to output scales each quantized kernel accepts).

Every real model seen passes them (the committed fixtures, an int8 MobileNetV2, the pipeline's exported runs).
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional


class Quantized(NamedTuple):
    dtype: int  # TensorType code
    scales: List[float]
    zeros: List[int]
    constant: bool


_UINT8, _INT8 = 3, 9
# Builtin operator codes (schema.fbs)
_ADD, _SUB, _MUL, _MEAN, _QUANTIZE = 0, 41, 18, 40, 114
_CONV, _DEPTHWISE, _FULLY_CONNECTED, _TRANSPOSE_CONV = 3, 4, 9, 67
_SOFTMAX, _LOGISTIC, _TANH = 25, 14, 28
# "Input and outputs must all have same scale/zero_point" in the int8 specification.
_SAME_SCALE = {1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 5: "DEPTH_TO_SPACE", 17: "MAX_POOL_2D", 22: "RESHAPE",
               26: "SPACE_TO_DEPTH", 34: "PAD", 36: "GATHER", 37: "BATCH_TO_SPACE_ND", 38: "SPACE_TO_BATCH_ND",
               39: "TRANSPOSE", 43: "SQUEEZE", 45: "STRIDED_SLICE", 49: "SPLIT", 60: "PADV2", 65: "SLICE",
               69: "TILE", 70: "EXPAND_DIMS", 83: "PACK", 88: "UNPACK", 97: "RESIZE_NEAREST_NEIGHBOR", 102: "SPLIT_V"}
# Fixed output (scale, zero point) per type.
_FIXED = {_SOFTMAX: ("SOFTMAX", {_INT8: (1 / 256, -128), _UINT8: (1 / 256, 0)}),
          _LOGISTIC: ("LOGISTIC", {_INT8: (1 / 256, -128), _UINT8: (1 / 256, 0)}),
          _TANH: ("TANH", {_INT8: (1 / 128, 0), _UINT8: (1 / 128, 128)})}
# XNNPACK's accepted ranges [low, high) of input scale / output scale.
_RATIO = {_ADD: ("ADD", 2.0 ** -10, 2.0 ** 8), _SUB: ("SUB", 2.0 ** -10, 2.0 ** 8), _MEAN: ("MEAN", 2.0 ** -8, 2.0 ** 8),
          _QUANTIZE: ("QUANTIZE", 2.0 ** -8, 2.0 ** 7)}
_WEIGHTED = {_CONV: "CONV_2D", _DEPTHWISE: "DEPTHWISE_CONV_2D", _FULLY_CONNECTED: "FULLY_CONNECTED",
             _TRANSPOSE_CONV: "TRANSPOSE_CONV"}


def _eight_bit(t: Optional[Quantized]) -> bool:
    return t is not None and t.dtype in (_UINT8, _INT8) and len(t.scales) >= 1


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-5 * max(abs(a), abs(b))


def operator_problem(builtin: int, inputs: List[Optional[Quantized]], outputs: List[Optional[Quantized]]) -> Optional[str]:
    """What is wrong with this operator's quantization (None when nothing is). Tensors are None when not quantized."""
    out = outputs[0] if outputs else None
    if not _eight_bit(out) or len(out.scales) != 1:
        return None
    o = out.scales[0]
    if builtin in _SAME_SCALE:
        for t in inputs:
            if _eight_bit(t) and t.dtype == out.dtype and len(t.scales) == 1 and not (
                    _same(t.scales[0], o) and t.zeros[:1] == out.zeros[:1]):
                return (f"{_SAME_SCALE[builtin]} has input scale {t.scales[0]:g} (zero point {t.zeros[:1]}) and output "
                        f"scale {o:g} (zero point {out.zeros[:1]}); expected the same (the int8 specification)")
    if builtin in _FIXED:
        name, fixed = _FIXED[builtin]
        if out.dtype in fixed:
            scale, zero = fixed[out.dtype]
            if not _same(o, scale) or out.zeros[:1] != [zero]:
                return f"{name} has output scale {o:g} and zero point {out.zeros[:1]}; expected {scale:g} and {zero}"
    if builtin in _RATIO:
        name, low, high = _RATIO[builtin]
        for t in inputs:
            if _eight_bit(t) and len(t.scales) == 1 and not low <= t.scales[0] / o < high:
                return (f"{name} has input scale {t.scales[0]:g} for output scale {o:g}: ratio {t.scales[0] / o:g}, "
                        f"expected {low:g} to {high:g}")
    if builtin == _MUL and len(inputs) >= 2 and _eight_bit(inputs[0]) and _eight_bit(inputs[1]):
        product = inputs[0].scales[0] * inputs[1].scales[0] / o
        if len(inputs[0].scales) == len(inputs[1].scales) == 1 and not 2.0 ** -16 <= product < 2.0 ** 8:
            return f"MUL has input scales {inputs[0].scales[0]:g} and {inputs[1].scales[0]:g} for output scale {o:g}: " \
                   f"ratio {product:g}, expected {2.0 ** -16:g} to {2.0 ** 8:g}"
    if builtin in _WEIGHTED and len(inputs) >= 2 and _eight_bit(inputs[0]) and _eight_bit(inputs[1]):
        data, weights = inputs[0], inputs[1]
        if len(data.scales) == 1:
            ratios = [data.scales[0] * w / o for w in weights.scales]
            worst = max(ratios, key=lambda r: max(r / 256, 2.0 ** -32 / r))
            if not all(2.0 ** -32 <= r < 256 for r in ratios):
                return (f"{_WEIGHTED[builtin]} has input scale {data.scales[0]:g}, weight scales down to "
                        f"{min(weights.scales):g} and up to {max(weights.scales):g}, output scale {o:g}: requantization "
                        f"{worst:g}, expected {2.0 ** -32:g} to 256")
    return None
