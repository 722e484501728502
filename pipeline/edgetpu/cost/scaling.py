"""The same model at another input size or width, without rebuilding it: how each op's cost scales.

An op whose output is an image-shaped tensor does work and holds activations in proportion to the output's area, so
a square input of side s' scales them by (s'/s)^2; parameters do not change with the input size (a global pooling
head). A width multiplier w scales a convolution's input and output channels, so its multiply-accumulates and
parameters by w^2 (by w for the first weight op, which reads the image's 3 channels, and for the last, which writes
the classes), a depthwise convolution's by w, and activations by w. These are estimates for the gate's advice; the
advice's command is then checked by the real pre-flight of the rebuilt model.
"""
from __future__ import annotations

from edge.model.tflite_file import ModelInfo

from pipeline.edgetpu.cost.features import DEPTHWISE, ModelCost, OpCost


def spatial_ops(info: ModelInfo) -> set:
    """Indices of the ops whose first output is an image-shaped [1, H, W, C] tensor with H x W > 1."""
    out = set()
    for op in info.ops:
        if op.outputs and op.outputs[0] >= 0:
            shape = info.tensor(op.outputs[0]).shape
            if len(shape) == 4 and shape[1] * shape[2] > 1:
                out.add(op.index)
    return out


def _channels(c: int, width: float) -> int:
    """Channels after a width multiplier, rounded to a multiple of 8 as Keras' MobileNets round them."""
    return max(8, int(c * width + 4) // 8 * 8) if width != 1.0 else c


def _scaled_shape(o: OpCost, width: float, first: bool, last: bool) -> tuple:
    w = o.weight_shape
    if o.op == DEPTHWISE:
        return (w[0], w[1], w[2], _channels(w[3], width))
    out = w[0] if last else _channels(w[0], width)
    inner = w[-1] if first else _channels(w[-1], width)
    return (out,) + tuple(w[1:-1]) + (inner,)


def rescaled(cost: ModelCost, info: ModelInfo, size_ratio: float = 1.0, width: float = 1.0, layout=None) -> ModelCost:
    """`cost` at size_ratio times the input side and `width` times the channels; with `layout`
    (pipeline/edgetpu/cost/layout.Layout) a weight op's compiled bytes are laid out again for its new shape."""
    area = size_ratio ** 2
    spatial = spatial_ops(info)
    weighted = [o.index for o in cost.ops if o.macs or o.depthwise_macs]
    first, last = (weighted[0], weighted[-1]) if weighted else (None, None)
    ops = []
    for o in cost.ops:
        a = area if o.index in spatial else 1.0
        if o.op == DEPTHWISE:
            w_macs = w_params = width
        elif o.macs:
            w_macs = w_params = width if o.index in (first, last) else width ** 2
        else:
            w_macs, w_params = width, (width if o.parameter_bytes else 1.0)
        params = int(o.parameter_bytes * w_params)
        shape = o.weight_shape
        if width != 1.0 and layout is not None and o.weight_shape:
            shape = _scaled_shape(o, width, o.index == first, o.index == last)
            params = layout.weight_bytes(o.op, shape) or params
        ops.append(OpCost(o.index, o.op, o.on_edgetpu, o.tail, int(o.macs * a * w_macs), int(o.depthwise_macs * a * w_macs),
                          params, int(o.activation_bytes * a * (width if o.index != last else 1.0)), shape))
    out_area = area if any(len(info.tensor(t).shape) >= 3 for t in info.outputs) else 1.0
    return ModelCost(ops, int(cost.input_bytes * area), int(cost.output_bytes * out_area))
