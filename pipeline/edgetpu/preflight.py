"""Pre-flight: predict, op by op, what edgetpu_compiler 16 will map to the Edge TPU.

    pipeline compile RUN --check-only

Follows Coral's model requirements and supported-ops table (pipeline/edgetpu/rules.py): 8-bit
tensors, sizes fixed at compile time, constant weights, at most 3 non-unit innermost dimensions,
each op's own limits, and op versions the compiler can parse. The mapping follows the graph: the
compiler builds one Edge TPU segment, so an op that reads a CPU op's output
after that segment stays on the CPU ("More than one subgraph is not supported") while ops on other
paths still map. The prediction agrees with every reference pair (Google's models and their compiled twins).
Over 300 lines because it is one job: each check needs the graph walk and the others' verdicts.

QUANTIZE, decided here:
- uint8 -> int8 after the input and int8 -> uint8 before the output (what TF 2.21 adds for uint8
  I/O): both sides 8-bit, QUANTIZE maps from runtime 12 (the reference pairs), and compiler 16 logs
  such QUANTIZE ops as "Mapped to Edge TPU" (public compiler logs), so they
  are predicted mapped. Their versions are checked against the parse limit (QUANTIZE v3+ fails).
- float32 -> int8 at a model input (float I/O): the compiler logs "Operation is otherwise
  supported, but not mapped due to some unspecified limitation" and still maps what
  follows; a DEQUANTIZE before an output gets "...unsupported data type". These two wrappers stay on
  the CPU without ending the Edge TPU segment. A DEQUANTIZE anywhere else ends it.

A detector's post-processing tail, decided here: `TFLite_Detection_PostProcess` as the last op writing every
output, with the DEQUANTIZE ops feeding it (pipeline.quant.verify.postprocess_tail), is what every Edge TPU
detector ends in. The compiler has no such op and leaves it on the CPU (its log: CUSTOM "Operation is working
on an unsupported data type"), after the one Edge TPU segment: it splits nothing. Those ops are predicted on
the CPU as the `tail`, not as a fallback, and the share on the Edge TPU counts the other ops.

Whole-model failures are reported as `fatal` (the compiler writes no model at all): an op version
above what compiler 16 parses ("Model could not be parsed"), a dynamic-sized tensor ("Attempting to
use a delegate that only supports static-sized tensors"), and a
model with no 8-bit tensor ("Model not quantized").
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

from edge.tflite_file import ModelInfo, OpInfo, constant_data, dynamic_tensors, ops_over_version, read_model
from pipeline.edgetpu import rules
from pipeline.quant.verify import postprocess_tail


class OpPrediction(NamedTuple):
    index: int
    op: str
    version: int
    status: str  # the compiler's own status string
    reason: str  # why, in words naming the tensor or option
    on_edgetpu: bool
    custom: bool = False  # a custom op: `op` is its custom code
    tail: bool = False  # part of a detector's post-processing, on the CPU after the Edge TPU segment by design

    @property
    def log_op(self) -> str:
        """The name the compiler's log prints: CUSTOM for every custom op."""
        return rules.CUSTOM_LOG_NAME if self.custom else self.op


class Preflight(NamedTuple):
    rows: List[OpPrediction]
    first_fallback: Optional[OpPrediction]  # the op where the graph leaves the Edge TPU
    fatal: Optional[str]  # a reason the compiler would refuse the whole model
    runtime: int  # Edge TPU runtime version assumed

    @property
    def ops_on_edgetpu(self) -> int:
        return sum(r.on_edgetpu for r in self.rows)

    @property
    def ops_in_tail(self) -> int:
        """Ops of a detector's post-processing tail: on the CPU at the end by design, not counted as falling back."""
        return sum(r.tail for r in self.rows)

    @property
    def ops_on_cpu(self) -> int:
        return len(self.rows) - self.ops_on_edgetpu - self.ops_in_tail

    @property
    def percent_on_edgetpu(self) -> float:
        """The share of the ops before the post-processing tail (all ops when there is none)."""
        counted = len(self.rows) - self.ops_in_tail
        return 100.0 * self.ops_on_edgetpu / counted if counted else 0.0

    @property
    def fully_mapped(self) -> bool:
        return self.fatal is None and self.ops_on_cpu == 0

    def headline(self) -> str:
        counted = len(self.rows) - self.ops_in_tail
        text = f"pre-flight: {self.ops_on_edgetpu}/{counted} ops predicted on the Edge TPU ({self.percent_on_edgetpu:.0f}%)"
        if self.ops_in_tail:
            text += f", then {self.ops_in_tail} post-processing op(s) on the CPU at the end, as every Edge TPU detector has"
        if self.fatal:
            return text + f"; the compiler is expected to refuse the model: {self.fatal}"
        if self.first_fallback:
            f = self.first_fallback
            text += f"; falls back to the CPU from op {f.index} {f.op}: {f.reason}"
        return text

    def as_dict(self) -> dict:
        return {
            "ops_on_edgetpu": self.ops_on_edgetpu,
            "ops_on_cpu": self.ops_on_cpu,
            "total_ops": len(self.rows),
            "ops_in_cpu_tail": self.ops_in_tail,
            "percent_on_edgetpu": round(self.percent_on_edgetpu, 2),
            "first_fallback": self.first_fallback._asdict() if self.first_fallback else None,
            "fatal": self.fatal,
            "assumed_runtime": self.runtime,
            "ops": [r._asdict() for r in self.rows],
        }


def analyze(source: Union[str, Path, bytes], runtime: int = rules.DEFAULT_RUNTIME) -> Preflight:
    """Predict the compiler's mapping of an int8 .tflite model (path or bytes)."""
    data = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
    info = read_model(data)
    producer = {t: op.index for op in info.ops for t in op.outputs}
    # after[k]: op k runs on the CPU after the Edge TPU segment (it has a mapped op upstream).
    mapped: Dict[int, bool] = {}
    after: Dict[int, bool] = {}
    rows: List[OpPrediction] = []
    first_fallback: Optional[OpPrediction] = None
    tail = postprocess_tail(info)
    for op in info.ops:  # a .tflite file stores ops in execution order: producers come first
        if op.index in tail:
            status, reason = check_op(op, info, data, runtime) or (rules.UNSUPPORTED_DTYPE, "works on float")
            rows.append(OpPrediction(op.index, op.name, op.version, status,
                                     f"post-processing on the CPU after the Edge TPU segment ({reason})", False,
                                     op.is_custom, tail=True))
            mapped[op.index], after[op.index] = False, False
            continue
        upstream = [producer[t] for t in op.inputs if t in producer]
        blocker = next((k for k in upstream if after.get(k)), None)
        problem = check_op(op, info, data, runtime)
        if problem is None and blocker is None:
            mapped[op.index], after[op.index] = True, False
            rows.append(OpPrediction(op.index, op.name, op.version, rules.MAPPED, "", True, op.is_custom))
            continue
        mapped[op.index] = False
        after[op.index] = any(mapped.get(k) or after.get(k) for k in upstream)
        if problem is None:
            b = info.ops[blocker]
            problem = (rules.MORE_THAN_ONE_SUBGRAPH, f"reads the output of op {b.index} {b.name}, which runs on the CPU "
                                                     "after the Edge TPU segment")
        row = OpPrediction(op.index, op.name, op.version, problem[0], problem[1], False, op.is_custom)
        rows.append(row)
        if first_fallback is None and problem[0] != rules.MORE_THAN_ONE_SUBGRAPH and not _is_io_wrapper(op, info):
            first_fallback = row
    return Preflight(rows, first_fallback, model_fatal(info), runtime)


def model_fatal(info: ModelInfo) -> Optional[str]:
    """Why the compiler would refuse the whole model (no output at all), or None."""
    for op, limit in ops_over_version(info, rules.MAX_PARSED_VERSION)[:1]:
        return (f"Model could not be parsed: op {op.index} {op.name} v{op.version} is newer than compiler 16 "
                f"parses (up to v{limit}); convert with an older op set")
    for t in dynamic_tensors(info)[:1]:
        return (f"dynamic-sized tensor {t.name!r} {list(t.shape_signature)}: the compiler refuses graphs with "
                "dynamic-sized tensors; export at a fixed batch of 1")
    if not any(t.dtype in rules.EIGHT_BIT for t in info.tensors):
        return "Model not quantized: no int8/uint8 tensor; export with full-integer quantization (--int8)"
    return None


def _is_io_wrapper(op: OpInfo, info: ModelInfo) -> bool:
    """A float<->int conversion at the model's edge: it runs on the CPU without splitting the graph."""
    if op.name == "QUANTIZE" and op.inputs and op.inputs[0] in info.inputs:
        return True
    return op.name == "DEQUANTIZE" and bool(op.outputs) and op.outputs[0] in info.outputs


def check_op(op: OpInfo, info: ModelInfo, data: bytes, runtime: int = rules.DEFAULT_RUNTIME) -> Optional[Tuple[str, str]]:
    """(status, reason) when the compiler will not map `op`, None when it will."""
    # The parse limit first: it applies to ops outside the table too (EXP v2 fails the whole compile).
    limit = rules.MAX_PARSED_VERSION.get(op.name)
    if limit is not None and op.version > limit:
        return rules.VERSION_NOT_SUPPORTED, f"{op.name} v{op.version} is newer than compiler 16 parses (up to v{limit})"
    if op.name in rules.FLOAT_BY_DESIGN_OPS:
        return rules.UNSUPPORTED_DTYPE, f"{op.name} works on float; the Edge TPU computes in 8 bits only"
    if op.is_custom:
        return _check_types(op, info) or (rules.NOT_SUPPORTED, f"custom op {op.name!r} is not an Edge TPU operation")
    if op.name not in rules.SUPPORTED_OPS:
        return rules.NOT_SUPPORTED, f"{op.name} is not in the Edge TPU's supported operations"
    if rules.SUPPORTED_OPS[op.name] > runtime:
        return rules.NOT_SUPPORTED, f"{op.name} needs Edge TPU runtime {rules.SUPPORTED_OPS[op.name]}+, targeting {runtime}"
    if op.name == "QUANTIZE" and op.inputs and info.tensor(op.inputs[0]).dtype not in rules.EIGHT_BIT:
        source = info.tensor(op.inputs[0])
        return rules.OTHER_LIMITATION, (f"QUANTIZE from {source.dtype} tensor {source.name!r}: the compiler leaves a "
                                        "float-to-int8 QUANTIZE on the CPU; export with uint8 or int8 I/O")
    for check in (_check_types, _check_static, _check_rank, _check_constant_params):
        problem = check(op, info)
        if problem:
            return problem
    specific = _OP_CHECKS.get(op.name)
    problem = specific(op, info, data) if specific else None
    if problem is None and op.name in _OLD_RUNTIME_CHECKS and runtime < rules.LOOSENED_AT_RUNTIME[op.name]:
        problem = _OLD_RUNTIME_CHECKS[op.name](op, info, data)
    return problem


def _activations(op: OpInfo, info: ModelInfo):
    for i in op.inputs + op.outputs:
        if i >= 0 and not info.tensor(i).is_constant:
            yield info.tensor(i)


def _check_types(op: OpInfo, info: ModelInfo):
    for t in _activations(op, info):
        if t.is_variable and t.dtype in rules.STATE_DTYPES:
            continue  # an LSTM's int16 cell state (edgetpu_rules.STATE_DTYPES)
        if t.dtype not in rules.EIGHT_BIT and not (t.dtype == "int32" and op.name in ("RESHAPE",)):
            return rules.UNSUPPORTED_DTYPE, f"tensor {t.name!r} is {t.dtype}, expected int8 or uint8"
    for i in op.inputs:
        if i >= 0 and info.tensor(i).is_constant and info.tensor(i).dtype not in rules.EIGHT_BIT + ("int32",):
            return rules.UNSUPPORTED_DTYPE, f"constant {info.tensor(i).name!r} is {info.tensor(i).dtype}, expected 8-bit (int32 for biases)"
    return None


def _check_static(op: OpInfo, info: ModelInfo):
    for t in _activations(op, info):
        if t.is_dynamic:
            return rules.OTHER_LIMITATION, f"tensor {t.name!r} has a dynamic size {list(t.shape_signature)}; the Edge TPU needs sizes fixed at compile time (export at batch 1)"
    return None


def _check_rank(op: OpInfo, info: ModelInfo):
    for t in _activations(op, info):
        leading = t.shape[:-3]
        if any(d > 1 for d in leading):
            return rules.UNSUPPORTED_RANK, f"tensor {t.name!r} has shape {list(t.shape)}: only the 3 innermost dimensions may be larger than 1"
    return None


def _check_constant_params(op: OpInfo, info: ModelInfo):
    if op.name in rules.WEIGHTED_OPS:
        for i in op.inputs[1:3]:
            if i >= 0 and not info.tensor(i).is_constant:
                return rules.NOT_CONSTANT, f"{op.name} parameter {info.tensor(i).name!r} is computed at run time, expected a constant"
    return None


def _no_fused_activation(op: OpInfo, info: ModelInfo, data: bytes):
    act = op.options.get("fused_activation_function", "NONE")
    if act != "NONE":
        return rules.OTHER_LIMITATION, f"{op.name} has a fused {act} activation; the Edge TPU maps it only without one"
    return None


def _same_dilation(op: OpInfo, info: ModelInfo, data: bytes):
    h, w = op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1)
    if h != w:
        return rules.OTHER_LIMITATION, f"{op.name} dilation {h}x{w}; the Edge TPU needs the same dilation in x and y"
    return None


def _fully_connected(op: OpInfo, info: ModelInfo, data: bytes):
    out = info.tensor(op.outputs[0]).shape
    if sum(d > 1 for d in out) > 1:
        return rules.OTHER_LIMITATION, f"FULLY_CONNECTED output shape {list(out)}; the Edge TPU needs a one-dimensional output"
    if op.options.get("weights_format", 0) not in (0, "DEFAULT"):
        return rules.OTHER_LIMITATION, "FULLY_CONNECTED weights are not in the default format"
    return None


def _concatenation(op: OpInfo, info: ModelInfo, data: bytes):
    problem = _no_fused_activation(op, info, data)
    if problem:
        return problem
    constants = [i for i in op.inputs if info.tensor(i).is_constant]
    if constants and len(op.inputs) != 2:
        return rules.OTHER_LIMITATION, "CONCATENATION with a constant input must have exactly 2 inputs (a zero-padding)"
    for i in constants:
        values = constant_data(data, i)
        if values is not None and values.any():
            return rules.OTHER_LIMITATION, f"CONCATENATION constant input {info.tensor(i).name!r} is not all zeros"
    return None


def _axes(op: OpInfo, info: ModelInfo, data: bytes, position: int):
    values = constant_data(data, op.inputs[position]) if len(op.inputs) > position else None
    rank = len(info.tensor(op.inputs[0]).shape)
    return None if values is None else sorted({int(a) % rank for a in values.reshape(-1)})


def _reduce(op: OpInfo, info: ModelInfo, data: bytes):
    axes = _axes(op, info, data, 1)
    if axes is None:
        return rules.NOT_CONSTANT, f"{op.name} axes are computed at run time, expected a constant"
    shape = info.tensor(op.inputs[0]).shape
    if 0 in axes and len(shape) == 4:
        return rules.OTHER_LIMITATION, f"{op.name} reduces the batch dimension (axes {axes})"
    if op.name == "MEAN" and len(shape) - 1 in axes and shape[-1] % 4:
        return rules.OTHER_LIMITATION, f"MEAN over the channel axis needs a multiple of 4 channels, got {shape[-1]}"
    return None


def _pad(op: OpInfo, info: ModelInfo, data: bytes):
    paddings = constant_data(data, op.inputs[1]) if len(op.inputs) > 1 else None
    if paddings is None:
        return rules.NOT_CONSTANT, "PAD paddings are computed at run time, expected a constant"
    if len(paddings) == 4 and paddings[0].any():
        return rules.OTHER_LIMITATION, f"PAD pads the batch dimension ({paddings[0].tolist()})"
    return None


def _softmax(op: OpInfo, info: ModelInfo, data: bytes):
    shape = info.tensor(op.inputs[0]).shape
    size = 1
    for d in shape:
        size *= d
    if sum(d > 1 for d in shape) > 1:
        return rules.OTHER_LIMITATION, f"SOFTMAX input shape {list(shape)}; the Edge TPU needs a one-dimensional input"
    if size > rules.SOFTMAX_MAX_ELEMENTS:
        return rules.OTHER_LIMITATION, f"SOFTMAX over {size} elements; the Edge TPU allows at most {rules.SOFTMAX_MAX_ELEMENTS}"
    return None


def _strided_slice(op: OpInfo, info: ModelInfo, data: bytes):
    strides = constant_data(data, op.inputs[3]) if len(op.inputs) > 3 else None
    if strides is None or (strides != 1).any():
        return rules.STRIDED_SLICE_STRIDES, f"STRIDED_SLICE strides {None if strides is None else strides.tolist()}, expected all 1"
    if op.options.get("ellipsis_mask", 0) or op.options.get("new_axis_mask", 0):
        return rules.OTHER_LIMITATION, "STRIDED_SLICE with an ellipsis or new-axis mask"
    return None


def _prelu(op: OpInfo, info: ModelInfo, data: bytes):
    alpha = info.tensor(op.inputs[1]).shape
    if sum(d > 1 for d in alpha[:-1]):
        return rules.OTHER_LIMITATION, f"PRELU alpha shape {list(alpha)}: only the innermost dimension may exceed 1 (Keras shared_axes=[1, 2])"
    return None


_OP_CHECKS = {
    "AVERAGE_POOL_2D": _no_fused_activation,
    "MAX_POOL_2D": _no_fused_activation,
    "CONV_2D": _same_dilation,
    "DEPTHWISE_CONV_2D": _same_dilation,
    "FULLY_CONNECTED": _fully_connected,
    "CONCATENATION": _concatenation,
    "MEAN": _reduce,
    "SUM": _reduce,
    "REDUCE_MAX": _reduce,
    "REDUCE_MIN": _reduce,
    "PAD": _pad,
    "SOFTMAX": _softmax,
    "STRIDED_SLICE": _strided_slice,
    "PRELU": _prelu,
}


def _resize(op: OpInfo, info: ModelInfo, data: bytes):
    for t in (info.tensor(op.inputs[0]), info.tensor(op.outputs[0])):
        if not (len(t.shape) == 3 or (len(t.shape) == 4 and t.shape[0] == 1)):
            return rules.OTHER_LIMITATION, f"{op.name} tensor {t.name!r} shape {list(t.shape)}; the Edge TPU needs a 3-D image (batch 1)"
    before, after = info.tensor(op.inputs[0]).shape, info.tensor(op.outputs[0]).shape
    if op.name in rules.RESIZE_FROM_SINGLE_PIXEL and before[-3:-1] == (1, 1) and after[-3:-1] != (1, 1):
        return rules.OTHER_LIMITATION, (f"{op.name} from a 1x1 image to {after[-3]}x{after[-2]}: the compiler leaves a "
                                        "resize of a single pixel on the CPU (precision limit, reference pair)")
    return None


_OP_CHECKS.update(RESIZE_BILINEAR=_resize, RESIZE_NEAREST_NEIGHBOR=_resize)


# The table's "<=12" rows, applied only below rules.LOOSENED_AT_RUNTIME[op]
# (13, or 12 where a reference twin shows the looser limit at runtime 12).
def _older_than(op: OpInfo) -> str:
    return f"runtimes below {rules.LOOSENED_AT_RUNTIME[op.name]}"


def _squeeze_leading_ones(op: OpInfo, info: ModelInfo, data: bytes):
    before, after = info.tensor(op.inputs[0]).shape, info.tensor(op.outputs[0]).shape
    dropped = len(before) - len(after)
    if before[dropped:] != after or any(d != 1 for d in before[:dropped]):
        return rules.OTHER_LIMITATION, f"SQUEEZE {list(before)} -> {list(after)} drops inner 1s; {_older_than(op)} need leading 1s only"
    return None


def _no_dilation(op: OpInfo, info: ModelInfo, data: bytes):
    if (op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1)) != (1, 1):
        return rules.OTHER_LIMITATION, f"{op.name} is dilated; {_older_than(op)} map no dilated depthwise kernels"
    return None


def _xy_only(position: int):
    def check(op: OpInfo, info: ModelInfo, data: bytes):
        shape = info.tensor(op.inputs[0]).shape
        if len(shape) != 4:
            return None
        if op.name == "PAD":
            values = constant_data(data, op.inputs[1])
            touched = [i for i in range(4) if values is not None and values[i].any()]
        else:
            touched = _axes(op, info, data, position) or []
        if any(a not in (1, 2) for a in touched):
            return rules.OTHER_LIMITATION, f"{op.name} on axes {touched}; {_older_than(op)} support the x and y axes only"
        return None
    return check


_OLD_RUNTIME_CHECKS = {
    "SQUEEZE": _squeeze_leading_ones,
    "DEPTHWISE_CONV_2D": _no_dilation,
    "MEAN": _xy_only(1),
    "PAD": _xy_only(1),
}


def table(preflight: Preflight) -> str:
    """The prediction in the compiler's own log layout (Operator, Count, Status), then the headline."""
    counts: Dict[Tuple[str, str], int] = {}
    for r in preflight.rows:
        counts[(r.log_op, r.status)] = counts.get((r.log_op, r.status), 0) + 1
    lines = [f"{'Operator':<31}{'Count':<11}Status"]
    lines += [f"{op:<31}{n:<11}{status}" for (op, status), n in counts.items()]
    # Then why, for each op that is not mapped for a reason of its own (not just "after the fallback").
    lines += [f"  op {r.index} {r.op} v{r.version}: {r.reason}" for r in preflight.rows
              if not r.on_edgetpu and r.status != rules.MORE_THAN_ONE_SUBGRAPH]
    lines.append(preflight.headline())
    return "\n".join(lines)
