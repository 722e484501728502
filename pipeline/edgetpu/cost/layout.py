"""The Edge TPU compiler's parameter layout, predicted: how many bytes each op's constants take once compiled, and which
of them stay cached on the chip and which are streamed from the host on every inference.

The compiled layout is larger than the raw int8 weights: output channels are padded, the contraction (kernel x input
channels) is padded, and each output channel carries its bias and requantization (coefficients.json says the
multiples and where they were fitted). The compiler caches whole ops' parameters while they fit the on-chip memory
left (about 8 MiB, less what it keeps for itself), in the order the ops run, skipping an op too large to fit and
going on with the next; what is not cached is streamed. That matches every public log used (bench/results/edgetpu_cost.md):
a model below the capacity streams nothing, a single 64 MiB layer is streamed whole.
"""
from __future__ import annotations

from typing import List, NamedTuple

from edge.model.tflite_file import ModelInfo, OpInfo

from pipeline.edgetpu.cost.features import DEPTHWISE, MATMUL_OPS, ModelCost, _shape


def _up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class Layout(NamedTuple):
    out_multiple: int  # output channels padded to this
    in_multiple: int  # input channels padded to this (per kernel tap)
    per_channel_bytes: int  # bias and requantization per output channel
    capacity_bytes: int  # on-chip memory for parameters

    def op_bytes(self, op: OpInfo, info: ModelInfo) -> int:
        """Compiled parameter bytes of one op (0 without constants)."""
        if (op.name in MATMUL_OPS or op.name == DEPTHWISE) and len(op.inputs) >= 2:
            compiled = self.weight_bytes(op.name, _shape(info, op.inputs[1]))
            if compiled is not None:
                return compiled
        return self._raw(op, info)

    def weight_bytes(self, op_name: str, w: tuple):
        """Compiled bytes of a weight tensor of shape `w` for op `op_name`; None for a shape this layout does not know."""
        if op_name == DEPTHWISE:
            return w[3] * w[1] * w[2] + w[3] * self.per_channel_bytes if len(w) == 4 else None
        if len(w) == 4:  # [oc, kh, kw, ic]
            oc, taps, ic = w[0], w[1] * w[2], w[3]
        elif len(w) == 2:  # [out, in]
            oc, taps, ic = w[0], 1, w[1]
        else:
            return None
        oc_padded = _up(oc, self.out_multiple)
        return oc_padded * taps * _up(ic, self.in_multiple) + oc_padded * self.per_channel_bytes

    @staticmethod
    def _raw(op: OpInfo, info: ModelInfo) -> int:
        return sum(info.tensor(t).buffer_size for t in op.inputs if t >= 0 and info.tensor(t).is_constant)


class Split(NamedTuple):
    cached_bytes: int  # "On-chip memory used for caching model parameters"
    streamed_bytes: int  # "Off-chip memory used for streaming uncached model parameters"
    capacity_bytes: int
    streamed_ops: List[int]  # indices of the ops whose parameters are streamed

    @property
    def remaining_bytes(self) -> int:
        """"On-chip memory remaining for caching model parameters"."""
        return self.capacity_bytes - self.cached_bytes

    @property
    def all_cached(self) -> bool:
        return self.streamed_bytes == 0


def split(cost: ModelCost, capacity_bytes: int) -> Split:
    """Cache the Edge TPU ops' parameters in execution order while they fit; stream the rest."""
    cached = streamed = 0
    streamed_ops = []
    for op in cost.ops:
        if not op.on_edgetpu or not op.parameter_bytes:
            continue
        if cached + op.parameter_bytes <= capacity_bytes:
            cached += op.parameter_bytes
        else:
            streamed += op.parameter_bytes
            streamed_ops.append(op.index)
    return Split(cached, streamed, capacity_bytes, streamed_ops)
