"""The prediction: parameter memory (cached, streamed) and milliseconds per inference on each Edge TPU device, for an
int8 .tflite the pre-flight has mapped.

    pipeline compile model_int8.tflite --check-only        prints it under the pre-flight's table

Edge TPU time is linear in a few features of the ops the pre-flight puts on the Edge TPU (coefficients.json, fitted on
Coral's published times by bench/edgetpu_cost/fit.py). A device with a `base` is the same Edge TPU behind another link:
its time is the base device's plus what its link adds (the Dev Board: parameters streamed over its PCIe; USB 2.0: the
bytes sent and read back and the parameters streamed each inference), and it is not predicted where its `requires` is
not met. Ops left on the CPU are costed with the same table's CPU columns; a detector's decoding and NMS on the host
come from this project's own measurement.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

from edge.model.tflite_file import ModelInfo

from pipeline.edgetpu.cost import coefficients
from pipeline.edgetpu.cost.features import ModelCost, OpCost, model_cost
from pipeline.edgetpu.cost.layout import Split, split

MIB = 2 ** 20
# Ops that combine or rescale whole tensors without weights: the vector unit's work, not the multiply array's.
ELEMENTWISE = ("ADD", "SUB", "MUL", "CONCATENATION")
# Recurrent ops: their weights are laid out by the compiler in a way the layout does not model (counted at their raw
# bytes, Google's one such test model compiles to twice that: bench/results/edgetpu_cost.md).
RECURRENT = ("UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN",
             "BIDIRECTIONAL_SEQUENCE_RNN", "RNN", "SVDF")


class DeviceTime(NamedTuple):
    device: str  # key in coefficients.json
    label: str  # the device as Coral's table names it
    edgetpu_ms: float  # the Edge TPU's part (its ops, parameter streaming, transfers)
    cpu_ms: Optional[float]  # ops left on the CPU (None: not grounded for this host)
    host_decode_ms: float  # a detector's decoding and NMS on the host (0 for other models)
    fitted_ms: tuple = ()  # (fastest, slowest) published time the device's coefficients were fitted on

    @property
    def extrapolated(self) -> bool:
        """The Edge TPU's part lies outside the published times the model was fitted on: a rough figure."""
        return bool(self.fitted_ms) and not self.fitted_ms[0] <= self.edgetpu_ms <= self.fitted_ms[1]

    @property
    def total_ms(self) -> float:
        return self.edgetpu_ms + (self.cpu_ms or 0.0) + self.host_decode_ms


class Estimate(NamedTuple):
    version: str  # the cost model's version (coefficients.json)
    split: Split
    times: List[DeviceTime]
    cost: ModelCost
    unpredicted: Dict[str, tuple] = {}  # device key -> (label, why its time is not predicted for this model)

    @property
    def recurrent_ops(self) -> int:
        """Ops on the Edge TPU whose parameters the layout counts at their raw bytes (RECURRENT)."""
        return sum(o.on_edgetpu and o.op in RECURRENT and o.parameter_bytes > 0 for o in self.cost.ops)

    def time(self, device: str) -> DeviceTime:
        for t in self.times:
            if t.device == device:
                return t
        raise KeyError(f"no prediction for device {device!r}; expected one of {', '.join(t.device for t in self.times)}")

    def lines(self) -> List[str]:
        s = self.split
        lines = [f"cost model {self.version}: parameters {_mib(s.cached_bytes + s.streamed_bytes)} as compiled: "
                 f"{_mib(s.cached_bytes)} cached on the chip, {_mib(s.streamed_bytes)} streamed from the host every "
                 f"inference (on-chip capacity about {_mib(s.capacity_bytes)})"]
        if self.recurrent_ops:
            lines.append(f"  parameters: {self.recurrent_ops} recurrent op{'s' if self.recurrent_ops != 1 else ''} counted at "
                         "raw bytes: how the compiler lays out a recurrent op's weights is not modelled (Google's one "
                         "such test model compiles to about twice the prediction)")
        for t in self.times:
            parts = [f"Edge TPU {t.edgetpu_ms:.1f}"]
            if t.cpu_ms:
                parts.append(f"CPU ops {t.cpu_ms:.1f}")
            if t.host_decode_ms:
                parts.append(f"decode+NMS {t.host_decode_ms:.1f}")
            detail = f" ({' + '.join(parts)})" if len(parts) > 1 else ""
            outside = (f"; outside the {t.fitted_ms[0]:g}-{t.fitted_ms[1]:g} ms of the published times it was fitted on, "
                       "so only a rough figure" if t.extrapolated else "")
            lines.append(f"  predicted {t.total_ms:.1f} ms per inference on the {t.label}{detail}{outside}")
        for label, why in self.unpredicted.values():
            lines.append(f"  not predicted on the {label}: {why}")
        return lines

    def as_dict(self) -> dict:
        s = self.split
        return {"cost_model_version": self.version, "cached_bytes": s.cached_bytes, "streamed_bytes": s.streamed_bytes,
                "remaining_bytes": s.remaining_bytes, "capacity_bytes": s.capacity_bytes, "all_cached": s.all_cached,
                "streamed_ops": s.streamed_ops, "recurrent_ops_counted_raw": self.recurrent_ops,
                "devices": {t.device: {"label": t.label, "total_ms": round(t.total_ms, 3), "edgetpu_ms": round(t.edgetpu_ms, 3),
                                       "cpu_ms": None if t.cpu_ms is None else round(t.cpu_ms, 3),
                                       "host_decode_ms": round(t.host_decode_ms, 3), "extrapolated": t.extrapolated}
                            for t in self.times},
                "not_predicted": {key: {"label": label, "why": why} for key, (label, why) in self.unpredicted.items()}}


def _mib(n: int) -> str:
    return f"{n / MIB:.2f} MiB"


def bound_gmacs(cost: ModelCost, memory: Split, ratio: float) -> float:
    """Sum over the Edge TPU's ops of max(GMAC, ratio x MiB streamed for the op): an op whose parameters are streamed
    waits for them or computes, whichever takes longer (the transfer overlaps the work), `ratio` being the time of a
    streamed MiB in GMAC of work."""
    streamed = set(memory.streamed_ops)
    return sum(max((o.macs + o.depthwise_macs) / 1e9, ratio * o.parameter_bytes / MIB if o.index in streamed else 0.0)
               for o in cost.ops if o.on_edgetpu)


def large_activation_mib(cost: ModelCost, threshold_mib: float) -> float:
    """MiB written by the Edge TPU's ops whose output is larger than `threshold_mib`: tensors too large to stay beside
    the cached parameters in the on-chip memory, which cost transfers of their own."""
    return sum(o.activation_bytes for o in cost.ops if o.on_edgetpu and o.activation_bytes > threshold_mib * MIB) / MIB


def edgetpu_features(cost: ModelCost, memory: Split, ratios=(), thresholds=()) -> Dict[str, float]:
    """The features the Edge TPU's time is linear in (names as in coefficients.json); `bound_gmacs@R` for each R in
    `ratios`, `large_activation_mib@T` for each T in `thresholds`."""
    tpu = [o for o in cost.ops if o.on_edgetpu]
    bounds = {f"bound_gmacs@{r:g}": bound_gmacs(cost, memory, r) for r in ratios}
    bounds.update({f"large_activation_mib@{t:g}": large_activation_mib(cost, t) for t in thresholds})
    return {**bounds, "intercept": 1.0,
            "gmacs": sum(o.macs for o in tpu) / 1e9,
            "depthwise_gmacs": sum(o.depthwise_macs for o in tpu) / 1e9,
            "streamed_mib": memory.streamed_bytes / MIB,
            "io_mib": (cost.input_bytes + cost.output_bytes) / MIB,
            "elementwise_ops": float(sum(o.op in ELEMENTWISE for o in tpu))}


def cpu_features(ops: List[OpCost]) -> Dict[str, float]:
    return {"gmacs": sum(o.macs + o.depthwise_macs for o in ops) / 1e9,
            "activation_mib": sum(o.activation_bytes for o in ops) / MIB, "ops": float(len(ops))}


def linear(coefs: Dict[str, float], features: Dict[str, float]) -> float:
    return sum(value * features.get(name, 0.0) for name, value in coefs.items())


def host_decode_ms(info: ModelInfo, cost: ModelCost) -> float:
    """A detector's decoding and NMS after the invoke: the post-processing op, or an anchor-free head's two outputs,
    priced per box from this project's measurement on an x86-64 host (coefficients.json `host_decode`)."""
    decode = coefficients.load()["host_decode"]
    boxes = 0
    if any(o.tail for o in cost.ops):
        boxes = max((_rows(info, t) for o in cost.ops if o.tail for t in info.ops[o.index].inputs if t >= 0), default=0)
    elif len(info.outputs) >= 2 and all(len(info.tensor(t).shape) == 3 for t in info.outputs):
        shapes = [info.tensor(t).shape for t in info.outputs]
        if any(s[-1] == decode["box_channels"] for s in shapes) and len({s[1] for s in shapes}) == 1:
            boxes = shapes[0][1]
    return decode["ms_per_1000_boxes"] * boxes / 1000.0


def _rows(info: ModelInfo, index: int) -> int:
    shape = info.tensor(index).shape
    return int(shape[1]) if len(shape) == 3 else 0


def estimate(info: ModelInfo, rows, cost: Optional[ModelCost] = None) -> Estimate:
    """The estimate for a model read by edge/model/tflite_file.py, with the pre-flight's rows (which op runs where)."""
    cost = cost or model_cost(info, rows, coefficients.layout().op_bytes)
    return estimate_cost(cost, host_decode_ms(info, cost))


def estimate_cost(cost: ModelCost, decode_ms: float) -> Estimate:
    """The estimate from per-op costs (also for a model rescaled by the gate's advice, advice.py)."""
    data = coefficients.load()
    memory = split(cost, coefficients.layout().capacity_bytes)
    names = [name for d in data["devices"].values() for name in d["edgetpu"] if "@" in name]
    ratios = sorted({float(n.split("@")[1]) for n in names if n.startswith("bound_gmacs@")})
    thresholds = sorted({float(n.split("@")[1]) for n in names if n.startswith("large_activation_mib@")})
    features = edgetpu_features(cost, memory, ratios, thresholds)
    cpu_ops = [o for o in cost.ops if not o.on_edgetpu and not o.tail]
    times, unpredicted, edgetpu_ms = [], {}, {}
    for key, device in data["devices"].items():  # a base device comes before the devices built on it
        why = _unmet(device.get("requires", ()), memory, cost)
        if device.get("base") in unpredicted:
            why = unpredicted[device["base"]][1]
        if why:
            unpredicted[key] = (device["label"], why)
            continue
        edgetpu_ms[key] = max(edgetpu_ms.get(device.get("base"), 0.0) + linear(device["edgetpu"], features), 0.0)
        cpu = device.get("cpu")
        cpu_ms = linear(cpu, cpu_features(cpu_ops)) if cpu and cpu_ops else (0.0 if not cpu_ops else None)
        times.append(DeviceTime(key, device["label"], edgetpu_ms[key], cpu_ms, decode_ms, tuple(device.get("fitted_ms", ()))))
    return Estimate(data["version"], memory, times, cost, unpredicted)


# What the public figures a device was fitted on were of, and so what its prediction requires of a model
# (coefficients.json `requires`): the words for it, and what a model outside it does instead ('' when it is inside).
REQUIREMENTS = {
    "all_cached": ("every parameter cached on the chip", lambda memory, cost: (
        "" if memory.all_cached else f"this one streams {_mib(memory.streamed_bytes)} of parameters")),
    "all_on_edgetpu": ("every op on the Edge TPU", lambda memory, cost: _on_cpu(sum(not o.on_edgetpu for o in cost.ops))),
}


def _on_cpu(n: int) -> str:
    return f"this one leaves {n} op{'s' if n != 1 else ''} on the CPU" if n else ""


def _unmet(requires, memory: Split, cost: ModelCost) -> str:
    """Why the model is outside what a device's public figures cover ('' when it is inside)."""
    instead = [REQUIREMENTS[r][1](memory, cost) for r in requires]
    if not any(instead):
        return ""
    return (f"the public figures it was fitted on are all of models with {' and '.join(REQUIREMENTS[r][0] for r in requires)}; "
            + ", and ".join(x for x in instead if x))
