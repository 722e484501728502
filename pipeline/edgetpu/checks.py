"""The Edge TPU's rules as checks: whether edgetpu_compiler 16 maps one op and, if not, why and what to change.

Each check returns a Problem: the compiler's own status string, the reason (naming the tensor or
option that breaks the rule) and the advice (the change to the model that makes the op map, as
concrete as the file allows: the shape to use, the op to cut before, the activation to use instead).
The advice sits in the check that finds the problem, so a rule and its remedy change together. The
facts come from pipeline/edgetpu/rules.py; the graph walk that uses these checks is preflight.py. Over 300
lines: one check per rule of Coral's requirements and table, each with its advice, in one place.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional

from edge.model.tflite_file import ModelInfo, OpInfo, TensorInfo, constant_data
from pipeline.edgetpu import rules


class Problem(NamedTuple):
    status: str  # the compiler's status string
    reason: str  # why, in words naming the tensor or option
    advice: str  # what to change so the op maps


FULL_INTEGER = ("quantize the whole model to full integer, int8 weights and activations (`pipeline export RUN --int8`, "
                "or the converter's TFLITE_BUILTINS_INT8 with a representative dataset of real images)")
INTEGER_IO = ("convert with uint8 (or int8) input and output (converter.inference_input_type = inference_output_type = "
              "tf.uint8, as `pipeline export RUN --int8` writes), and feed it raw pixels")


def check_op(op: OpInfo, info: ModelInfo, data: bytes, runtime: int = rules.DEFAULT_RUNTIME) -> Optional[Problem]:
    """The Problem that keeps the compiler from mapping `op`, None when it maps."""
    # The parse limit first: it applies to ops outside the table too (EXP v2 fails the whole compile).
    limit = rules.MAX_PARSED_VERSION.get(op.name)
    if limit is not None and op.version > limit:
        return Problem(rules.VERSION_NOT_SUPPORTED, f"{op.name} v{op.version} is newer than compiler 16 parses (up to v{limit})",
                       version_advice(op, info, limit))
    if op.name in rules.FLOAT_BY_DESIGN_OPS:
        return Problem(rules.UNSUPPORTED_DTYPE, f"{op.name} works on float; the Edge TPU computes in 8 bits only",
                       _float_op_advice(op, info, data, runtime))
    if op.is_custom:
        problem = _check_types(op, info) or Problem(rules.NOT_SUPPORTED, f"custom op {op.name!r} is not an Edge TPU operation", "")
        return problem._replace(advice=unsupported_advice(op, info))
    if op.name not in rules.SUPPORTED_OPS:
        return Problem(rules.NOT_SUPPORTED, f"{op.name} is not in the Edge TPU's supported operations",
                       unsupported_advice(op, info))
    needed = rules.SUPPORTED_OPS[op.name]
    if needed > runtime:
        return Problem(rules.NOT_SUPPORTED, f"{op.name} needs Edge TPU runtime {needed}+, targeting {runtime}",
                       f"target Edge TPU runtime {needed} or newer (--min-runtime-version {needed}, a libedgetpu of "
                       f"runtime {needed}+ on the device), or "
                       + ("convert with int8 (not uint8) input and output, which need no QUANTIZE" if op.name == "QUANTIZE"
                          else f"rebuild without {op.name}"))
    if op.name == "QUANTIZE" and op.inputs and info.tensor(op.inputs[0]).dtype not in rules.EIGHT_BIT:
        source = info.tensor(op.inputs[0])
        return Problem(rules.OTHER_LIMITATION, f"QUANTIZE from {source.dtype} tensor {source.name!r}: the compiler leaves a "
                                               "float-to-int8 QUANTIZE on the CPU", _quantize_advice(op, info))
    for check in (_check_types, _check_static, _check_rank, _check_constant_params):
        problem = check(op, info)
        if problem:
            return problem
    specific = _OP_CHECKS.get(op.name)
    problem = specific(op, info, data) if specific else None
    if problem is None and op.name in _OLD_RUNTIME_CHECKS and runtime < rules.LOOSENED_AT_RUNTIME[op.name]:
        problem = _OLD_RUNTIME_CHECKS[op.name](op, info, data)
    return problem


# --- advice that needs the graph --------------------------------------------------------------------


def downstream(op: OpInfo, info: ModelInfo) -> List[OpInfo]:
    """`op` and every op that reads what it computes, directly or not, in file order (producers come first)."""
    reached, frontier = [op], set(op.outputs)
    for later in info.ops[op.index + 1:]:
        if any(t in frontier for t in later.inputs):
            reached.append(later)
            frontier.update(later.outputs)
    return reached


def cut_advice(op: OpInfo, info: ModelInfo) -> Optional[str]:
    """"Cut the tail before `op`" when `op` and all that follows from it hold no weights (post-processing: it belongs on
    the host), naming the tensors that become the cut model's outputs; None when learned layers follow."""
    tail = downstream(op, info)
    if any(o.name in rules.WEIGHTED_OPS for o in tail):
        return None
    made = {t for o in tail for t in o.outputs}
    cut: List[int] = []  # what the tail reads from before it: the outputs of the cut model
    for o in tail:
        cut += [t for t in o.inputs if t >= 0 and t not in made and t not in cut and not info.tensor(t).is_constant]
    after = f" and the {len(tail) - 1} op(s) after it" if len(tail) > 1 else ""
    return (f"cut the tail: end the model before op {op.index} {op.name}, with {_names(info, cut)} as its output(s), "
            f"and run {op.name}{after} on the host (no weights there)")


def unsupported_advice(op: OpInfo, info: ModelInfo) -> str:
    """For an op the Edge TPU does not have: its replacement, or the tail to cut, or rebuilding without it."""
    if op.name in rules.REPLACEMENTS:
        return rules.REPLACEMENTS[op.name]
    cut = cut_advice(op, info)
    if cut:
        return cut
    kind = f"custom op {op.name!r}" if op.is_custom else op.name
    return (f"rebuild without {kind}: learned layers follow it, and no such op maps (the ops that do are listed in "
            "docs/stages/compile.md)")


def version_advice(op: OpInfo, info: ModelInfo, limit: int) -> str:
    """What wrote `op` above the version compiler 16 parses, found in the file. All ops of one kind share one opcode
    and so one version: the cause may be another op of the same kind."""
    if op.name not in rules.SUPPORTED_OPS:  # EXP: no version of it maps; remove it rather than rewrite it
        return unsupported_advice(op, info)
    for same in [op] + [o for o in info.ops if o.name == op.name and o.index != op.index]:
        cause = _version_cause(same, info)
        if cause:
            where = "" if same.index == op.index else f" (every {op.name} shares one version: op {same.index} raises it)"
            return f"{cause}{where}; compiler 16 parses {op.name} up to v{limit}"
    return (f"convert so {op.name} is written at v{limit} or lower: int8 weights and activations, no options newer than "
            f"compiler 16 (public reports name TF 2.8 for CONV_2D, the legacy converter for TRANSPOSE_CONV)")


def _version_cause(op: OpInfo, info: ModelInfo) -> Optional[str]:
    """The feature of `op` that TFLite writes at a version compiler 16 cannot parse (TFLite's op_version rules)."""
    weights = [info.tensor(i) for i in op.inputs[1:] if i >= 0 and info.tensor(i).is_constant]
    values = list(_activations(op, info))
    if any(t.dtype == "int4" for t in weights):
        return f"op {op.index} {op.name} has int4 weights: quantize its weights to int8"
    if any(t.dtype == "int16" for t in values):
        return f"op {op.index} {op.name} has int16 activations (16x8 quantization): quantize activations to int8"
    if any(t.dtype.startswith("float") for t in values) and any(t.dtype == "int8" for t in weights):
        return (f"op {op.index} {op.name} is hybrid (float activations, int8 weights: dynamic-range quantization): "
                f"{FULL_INTEGER}")
    if op.name == "CONV_2D" and len(op.inputs) > 1:
        filters, source = info.tensor(op.inputs[1]).shape, info.tensor(op.inputs[0]).shape
        if filters and source and filters[-1] != source[-1] and filters[-1]:
            groups = source[-1] // filters[-1]
            return (f"op {op.index} CONV_2D is a grouped convolution ({groups} groups of {filters[-1]} input channels): "
                    f"write it as {groups} convolutions on a SPLIT of its input joined by CONCATENATION (all mapped), or "
                    "as DEPTHWISE_CONV_2D when each group has one input channel")
    if op.name == "TRANSPOSE_CONV" and op.options.get("fused_activation_function", "NONE") != "NONE":
        return (f"op {op.index} TRANSPOSE_CONV has a fused {op.options['fused_activation_function']}: upsample with "
                "RESIZE_NEAREST_NEIGHBOR followed by CONV_2D (both mapped) instead of the transposed convolution")
    if op.name == "QUANTIZE" and op.outputs and len(info.tensor(op.outputs[0]).scales) > 1:
        return f"op {op.index} QUANTIZE quantizes per channel: quantize activations per tensor"
    return None


def _float_op_advice(op: OpInfo, info: ModelInfo, data: bytes, runtime: int) -> str:
    """DEQUANTIZE or a float post-processing op: float I/O, a float tail to cut, or a float op in the middle."""
    if op.name == "DEQUANTIZE" and op.outputs and op.outputs[0] in info.outputs:
        return f"float output left: {INTEGER_IO}"
    cut = cut_advice(op, info)
    if cut:
        return cut
    readers = [o for o in info.ops if any(t in op.outputs for t in o.inputs)]
    for reader in readers:  # a DEQUANTIZE in the middle feeds an op the converter kept in float: change that op
        problem = check_op(reader, info, data, runtime)
        if problem and problem.advice:
            return f"op {reader.index} {reader.name} runs in float after it: {problem.advice}"
    return FULL_INTEGER


def _quantize_advice(op: OpInfo, info: ModelInfo) -> str:
    if op.inputs[0] in info.inputs:
        return f"float input left: {INTEGER_IO}"
    return FULL_INTEGER  # a float section in the middle: quantize it too


def _names(info: ModelInfo, tensors: List[int]) -> str:
    return ", ".join(repr(info.tensor(t).name) for t in tensors) or "nothing"


# --- the model requirements, for every op ----------------------------------------------------------


def _activations(op: OpInfo, info: ModelInfo):
    for i in op.inputs + op.outputs:
        if i >= 0 and not info.tensor(i).is_constant:
            yield info.tensor(i)


def _dtype_advice(t: TensorInfo) -> str:
    if t.dtype.startswith("float"):
        return FULL_INTEGER
    if t.dtype == "int16":
        return "quantize activations to int8, not 16x8 (int16 activations)"
    return (f"keep {t.dtype} values off the Edge TPU: they come from shape or index arithmetic (SHAPE, CAST, RANGE, "
            "ARG_MAX); give the model a fixed input shape so it folds into constants, or move it to the host")


def _check_types(op: OpInfo, info: ModelInfo) -> Optional[Problem]:
    for t in _activations(op, info):
        if t.is_variable and t.dtype in rules.STATE_DTYPES:
            continue  # an LSTM's int16 cell state (rules.STATE_DTYPES)
        if t.dtype not in rules.EIGHT_BIT and not (t.dtype == "int32" and op.name in ("RESHAPE",)):
            return Problem(rules.UNSUPPORTED_DTYPE, f"tensor {t.name!r} is {t.dtype}, expected int8 or uint8", _dtype_advice(t))
    for i in op.inputs:
        t = info.tensor(i) if i >= 0 else None
        if t is not None and t.is_constant and t.dtype not in rules.EIGHT_BIT + ("int32",):
            return Problem(rules.UNSUPPORTED_DTYPE, f"constant {t.name!r} is {t.dtype}, expected 8-bit (int32 for biases)",
                           _dtype_advice(t))
    return None


def static_advice(info: ModelInfo) -> str:
    """A fixed input shape, spelled out from the model's own inputs (or, when they are fixed, sizes computed in the graph)."""
    if not any(info.tensor(i).is_dynamic for i in info.inputs):
        return ("compute sizes from constants: a size the graph computes at run time (a reshape to tf.shape(x)) stays "
                "dynamic in the file; reshape to fixed numbers")
    shapes, spatial = [], False
    for i in info.inputs:
        signature = list(info.tensor(i).shape_signature)
        spatial = spatial or any(d < 0 for d in signature[1:])
        shapes.append([1 if k == 0 and d < 0 else d for k, d in enumerate(signature)])
    fixed = " and ".join(str(s).replace("-1", "N") for s in shapes)
    text = f"export at a fixed batch of 1 with input shape {fixed}"
    if spatial:
        text += (", N a fixed height and width (the size the model was trained at; `pipeline import --image-size N` for "
                 "an imported model)")
    return text + " (keras.Input(shape, batch_size=1), or tf.TensorSpec of that shape for the concrete function converted)"


def _check_static(op: OpInfo, info: ModelInfo) -> Optional[Problem]:
    for t in _activations(op, info):
        if t.is_dynamic:
            return Problem(rules.OTHER_LIMITATION, f"tensor {t.name!r} has a dynamic size {list(t.shape_signature)}; the Edge "
                                                   "TPU needs sizes fixed at compile time", static_advice(info))
    return None


def _rank_advice(t: TensorInfo, info: ModelInfo) -> str:
    batches = [info.tensor(i).shape[0] for i in info.inputs if info.tensor(i).shape]
    if t.shape[0] > 1 and t.shape[0] in batches:
        shapes = " and ".join(str([1, *info.tensor(i).shape[1:]]) for i in info.inputs)
        return (f"export at batch 1, input shape {shapes} (the Edge TPU runs one image per invoke: loop over the batch "
                f"of {t.shape[0]} on the host)")
    leading, inner = t.shape[:-3], t.shape[-3:]
    folded = 1
    for d in leading:
        folded *= d
    lower = [1, folded * inner[0], *inner[1:]]
    return (f"a reshape of lower rank: keep this tensor 4-D with batch 1, folding the leading dimensions into the next "
            f"({list(t.shape)} -> {lower}), and compute what reads it on that layout")


def _check_rank(op: OpInfo, info: ModelInfo) -> Optional[Problem]:
    for t in _activations(op, info):
        leading = t.shape[:-3]
        if any(d > 1 for d in leading):
            return Problem(rules.UNSUPPORTED_RANK, f"tensor {t.name!r} has shape {list(t.shape)}: only the 3 innermost "
                                                   "dimensions may be larger than 1", _rank_advice(t, info))
    return None


def _check_constant_params(op: OpInfo, info: ModelInfo) -> Optional[Problem]:
    if op.name in rules.WEIGHTED_OPS:
        for i in op.inputs[1:3]:
            if i >= 0 and not info.tensor(i).is_constant:
                return Problem(rules.NOT_CONSTANT, f"{op.name} parameter {info.tensor(i).name!r} is computed at run time, "
                                                   "expected a constant",
                               f"make {info.tensor(i).name!r} a constant in the file: weights fed in as an input or computed "
                               "in the graph (a weight normalization) must be folded into the layer before conversion")
    return None


# --- each op's own limits (Coral's table) -----------------------------------------------------------


def _no_fused_activation(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    act = op.options.get("fused_activation_function", "NONE")
    if act != "NONE":
        where = ("apply it before the pooling, where it fuses into the op before (max-pooling and ReLU commute)"
                 if op.name == "MAX_POOL_2D" else "apply it to the inputs before the op instead (then fine-tune)")
        return Problem(rules.OTHER_LIMITATION, f"{op.name} has a fused {act} activation; the Edge TPU maps it only without one",
                       f"keep the {act} out of {op.name}: {where}")
    return None


def _same_dilation(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    h, w = op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1)
    if h != w:
        return Problem(rules.OTHER_LIMITATION, f"{op.name} dilation {h}x{w}; the Edge TPU needs the same dilation in x and y",
                       f"use one dilation rate in both directions ({max(h, w)}x{max(h, w)} or {min(h, w)}x{min(h, w)})")
    return None


def _fully_connected(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    out = info.tensor(op.outputs[0]).shape
    if sum(d > 1 for d in out) > 1:
        return Problem(rules.OTHER_LIMITATION, f"FULLY_CONNECTED output shape {list(out)}; the Edge TPU needs a one-dimensional output",
                       "flatten (or global-pool) the input of the Dense layer so its output is [1, units], or use a 1x1 "
                       "CONV_2D for a per-position Dense")
    if op.options.get("weights_format", 0) not in (0, "DEFAULT"):
        return Problem(rules.OTHER_LIMITATION, "FULLY_CONNECTED weights are not in the default format",
                       "convert with the default weights format (no shuffled weights)")
    return None


def _concatenation(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    problem = _no_fused_activation(op, info, data)
    if problem:
        return problem
    constants = [i for i in op.inputs if info.tensor(i).is_constant]
    fix = "pad with zeros through PAD, or add a constant with ADD, instead of concatenating a constant"
    if constants and len(op.inputs) != 2:
        return Problem(rules.OTHER_LIMITATION, "CONCATENATION with a constant input must have exactly 2 inputs (a zero-padding)", fix)
    for i in constants:
        values = constant_data(data, i)
        if values is not None and values.any():
            return Problem(rules.OTHER_LIMITATION, f"CONCATENATION constant input {info.tensor(i).name!r} is not all zeros", fix)
    return None


def _axes(op: OpInfo, info: ModelInfo, data: bytes, position: int):
    values = constant_data(data, op.inputs[position]) if len(op.inputs) > position else None
    rank = len(info.tensor(op.inputs[0]).shape)
    return None if values is None else sorted({int(a) % rank for a in values.reshape(-1)})


def _reduce(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    axes = _axes(op, info, data, 1)
    if axes is None:
        return Problem(rules.NOT_CONSTANT, f"{op.name} axes are computed at run time, expected a constant",
                       f"give {op.name} constant axes (a list in the code, not a computed tensor)")
    shape = info.tensor(op.inputs[0]).shape
    if 0 in axes and len(shape) == 4:
        return Problem(rules.OTHER_LIMITATION, f"{op.name} reduces the batch dimension (axes {axes})",
                       f"reduce over height, width or channels only (axes {[a for a in axes if a] or [1, 2]})")
    if op.name == "MEAN" and len(shape) - 1 in axes and shape[-1] % 4:
        return Problem(rules.OTHER_LIMITATION, f"MEAN over the channel axis needs a multiple of 4 channels, got {shape[-1]}",
                       f"give the layer before it {shape[-1] + (-shape[-1]) % 4} channels (a multiple of 4)")
    return None


def _pad(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    paddings = constant_data(data, op.inputs[1]) if len(op.inputs) > 1 else None
    if paddings is None:
        return Problem(rules.NOT_CONSTANT, "PAD paddings are computed at run time, expected a constant",
                       "give PAD constant paddings (a list in the code, not a computed tensor)")
    if len(paddings) == 4 and paddings[0].any():
        return Problem(rules.OTHER_LIMITATION, f"PAD pads the batch dimension ({paddings[0].tolist()})",
                       "pad height and width (or channels) only, never the batch")
    return None


def _softmax(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    shape = info.tensor(op.inputs[0]).shape
    size = 1
    for d in shape:
        size *= d
    host = cut_advice(op, info)
    if sum(d > 1 for d in shape) > 1:
        return Problem(rules.OTHER_LIMITATION, f"SOFTMAX input shape {list(shape)}; the Edge TPU needs a one-dimensional input",
                       f"reshape to [1, {size}] before the softmax" + (f", or {host}" if host else ""))
    if size > rules.SOFTMAX_MAX_ELEMENTS:
        return Problem(rules.OTHER_LIMITATION, f"SOFTMAX over {size} elements; the Edge TPU allows at most {rules.SOFTMAX_MAX_ELEMENTS}",
                       _fitting_size(info, size, rules.SOFTMAX_MAX_ELEMENTS) + (f", or {host}" if host else ""))
    return None


def _fitting_size(info: ModelInfo, size: int, limit: int) -> str:
    """The input size at which a tensor that grows with the input's area has at most `limit` elements."""
    image = next((info.tensor(i).shape for i in info.inputs if len(info.tensor(i).shape) == 4), None)
    if not image:
        return f"bring it to at most {limit} elements"
    height, width = image[1], image[2]
    scale = (limit / size) ** 0.5
    fit_h, fit_w = max(8, int(height * scale) // 8 * 8), max(8, int(width * scale) // 8 * 8)
    return (f"an input size at which it fits: {fit_h}x{fit_w} instead of {height}x{width}, if it grows with the input's "
            f"area (per-position scores do), or fewer classes")


def _strided_slice(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    strides = constant_data(data, op.inputs[3]) if len(op.inputs) > 3 else None
    if strides is None or (strides != 1).any():
        step = None if strides is None else strides.tolist()
        return Problem(rules.STRIDED_SLICE_STRIDES, f"STRIDED_SLICE strides {step}, expected all 1",
                       "slice with stride 1; to take every k-th pixel (x[:, ::k, ::k]) use MaxPool2D(pool_size=1, "
                       "strides=k), and for all k*k phases at once (a YOLO Focus layer) SPACE_TO_DEPTH(k)")
    if op.options.get("ellipsis_mask", 0) or op.options.get("new_axis_mask", 0):
        return Problem(rules.OTHER_LIMITATION, "STRIDED_SLICE with an ellipsis or new-axis mask",
                       "index every axis explicitly (no `...` or tf.newaxis), then RESHAPE for a new axis")
    return None


def _prelu(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    alpha = info.tensor(op.inputs[1]).shape
    if sum(d > 1 for d in alpha[:-1]):
        return Problem(rules.OTHER_LIMITATION, f"PRELU alpha shape {list(alpha)}: only the innermost dimension may exceed 1",
                       "share the slope over height and width: Keras PReLU(shared_axes=[1, 2])")
    return None


def _resize(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    for t in (info.tensor(op.inputs[0]), info.tensor(op.outputs[0])):
        if not (len(t.shape) == 3 or (len(t.shape) == 4 and t.shape[0] == 1)):
            return Problem(rules.OTHER_LIMITATION, f"{op.name} tensor {t.name!r} shape {list(t.shape)}; the Edge TPU needs a 3-D image (batch 1)",
                           "resize one image at a time: a [1, height, width, channels] tensor")
    before, after = info.tensor(op.inputs[0]).shape, info.tensor(op.outputs[0]).shape
    if op.name in rules.RESIZE_FROM_SINGLE_PIXEL and before[-3:-1] == (1, 1) and after[-3:-1] != (1, 1):
        return Problem(rules.OTHER_LIMITATION, f"{op.name} from a 1x1 image to {after[-3]}x{after[-2]}: the compiler leaves a "
                                               "resize of a single pixel on the CPU (precision limit, reference pair)",
                       "the result is that one pixel repeated: use RESIZE_NEAREST_NEIGHBOR (the same values; predicted "
                       "mapped, which no reference pair confirms)")
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
    "RESIZE_BILINEAR": _resize,
    "RESIZE_NEAREST_NEIGHBOR": _resize,
}


# The table's "<=12" rows, applied only below rules.LOOSENED_AT_RUNTIME[op]
# (13, or 12 where a reference twin shows the looser limit at runtime 12).
def _older_than(op: OpInfo) -> str:
    return f"runtimes below {rules.LOOSENED_AT_RUNTIME[op.name]}"


def _newer_runtime(op: OpInfo, alternative: str) -> str:
    needed = rules.LOOSENED_AT_RUNTIME[op.name]
    return f"target Edge TPU runtime {needed} or newer (--min-runtime-version {needed}), or {alternative}"


def _squeeze_leading_ones(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    before, after = info.tensor(op.inputs[0]).shape, info.tensor(op.outputs[0]).shape
    dropped = len(before) - len(after)
    if before[dropped:] != after or any(d != 1 for d in before[:dropped]):
        return Problem(rules.OTHER_LIMITATION, f"SQUEEZE {list(before)} -> {list(after)} drops inner 1s; {_older_than(op)} need leading 1s only",
                       _newer_runtime(op, f"RESHAPE to {list(after)} instead"))
    return None


def _no_dilation(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
    if (op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1)) != (1, 1):
        return Problem(rules.OTHER_LIMITATION, f"{op.name} is dilated; {_older_than(op)} map no dilated depthwise kernels",
                       _newer_runtime(op, "an undilated kernel"))
    return None


def _xy_only(position: int):
    def check(op: OpInfo, info: ModelInfo, data: bytes) -> Optional[Problem]:
        shape = info.tensor(op.inputs[0]).shape
        if len(shape) != 4:
            return None
        if op.name == "PAD":
            values = constant_data(data, op.inputs[1])
            touched = [i for i in range(4) if values is not None and values[i].any()]
        else:
            touched = _axes(op, info, data, position) or []
        if any(a not in (1, 2) for a in touched):
            return Problem(rules.OTHER_LIMITATION, f"{op.name} on axes {touched}; {_older_than(op)} support the x and y axes only",
                           _newer_runtime(op, "work on height and width only"))
        return None
    return check


_OLD_RUNTIME_CHECKS = {
    "SQUEEZE": _squeeze_leading_ones,
    "DEPTHWISE_CONV_2D": _no_dilation,
    "MEAN": _xy_only(1),
    "PAD": _xy_only(1),
}
