"""Pre-flight: predict, op by op, what edgetpu_compiler 16 will map to the Edge TPU.

    pipeline compile RUN --check-only

Follows Coral's model requirements and supported-ops table (pipeline/edgetpu/rules.py): 8-bit
tensors, sizes fixed at compile time, constant weights, at most 3 non-unit innermost dimensions,
each op's own limits, and op versions the compiler can parse; each rule is a check in checks.py,
which also says what to change. The mapping follows the graph: the
compiler builds one Edge TPU segment, so an op that reads a CPU op's output
after that segment stays on the CPU ("More than one subgraph is not supported") while ops on other
paths still map. The prediction agrees with every reference pair (Google's models and their compiled twins).

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

from edge.model.tflite_file import ModelInfo, OpInfo, dynamic_tensors, ops_over_version, read_model
from pipeline.edgetpu import rules
from pipeline.edgetpu.checks import Problem, check_op, static_advice, version_advice
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
    advice: str = ""  # what to change so it maps (for an op after the fallback: which op to change first)
    follows: Optional[int] = None  # for an op on the CPU only because it follows a fallback: that fallback's index

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
            "advice": self.advice(),
        }

    def advice(self) -> List[dict]:
        """What to change, one entry per problem: the ops with the same status and advice together (the first
        fallback's entry first; the ops that only follow a fallback last, in one entry). Each entry:
        ops (indices), where (those as ranges), op (their names), version, status, reason (of its first op),
        advice, first (the first fallback's index when it holds it, else None), heading (which ops, in words)."""
        groups: Dict[tuple, dict] = {}
        for r in self.rows:
            if r.on_edgetpu or r.tail:
                continue
            following = r.status == rules.MORE_THAN_ONE_SUBGRAPH
            entry = groups.setdefault((r.status, "" if following else r.advice),
                                      {"ops": [], "follows": [], "names": [], "version": r.version, "status": r.status,
                                       "reason": r.reason, "advice": r.advice, "first": None})
            entry["ops"].append(r.index)
            entry["follows"] += [] if r.follows is None or r.follows in entry["follows"] else [r.follows]
            entry["names"] += [] if r.op in entry["names"] else [r.op]
            if r == self.first_fallback:
                entry["first"] = r.index
        entries = sorted(groups.values(),
                         key=lambda e: (e["first"] is None, e["status"] == rules.MORE_THAN_ONE_SUBGRAPH, e["ops"][0]))
        for e in entries:
            names = e.pop("names")
            e["where"] = _ranges(e["ops"])
            e["op"] = names[0] if len(names) == 1 else ", ".join(names)
            if len(names) > 1:
                e["version"] = None
            follows = e.pop("follows")
            if e["status"] == rules.MORE_THAN_ONE_SUBGRAPH:  # a mix of ops: what they have in common is where they are
                e["reason"] = "on the CPU after the Edge TPU segment, downstream of a fallback"
                if len(follows) > 1:
                    e["advice"] = f"nothing of their own: each maps once the fallback it follows does (ops {_ranges(follows)})"
            e["heading"] = advice_heading(e)
        return entries


def analyze(source: Union[str, Path, bytes], runtime: int = rules.DEFAULT_RUNTIME) -> Preflight:
    """Predict the compiler's mapping of an int8 .tflite model (path or bytes), with what to change for each op that
    stays on the CPU."""
    data = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
    info = read_model(data)
    producer = {t: op.index for op in info.ops for t in op.outputs}
    # after[k]: op k runs on the CPU after the Edge TPU segment (it has a mapped op upstream);
    # cause[k]: the op with a problem of its own that put it there.
    mapped: Dict[int, bool] = {}
    after: Dict[int, bool] = {}
    cause: Dict[int, int] = {}
    rows: List[OpPrediction] = []
    first_fallback: Optional[OpPrediction] = None
    tail = postprocess_tail(info)
    for op in info.ops:  # a .tflite file stores ops in execution order: producers come first
        if op.index in tail:
            status, reason, _ = check_op(op, info, data, runtime) or (rules.UNSUPPORTED_DTYPE, "works on float", "")
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
        cause[op.index] = op.index if problem else cause[blocker]
        if problem is None:
            b, root = info.ops[blocker], info.ops[cause[blocker]]
            problem = Problem(rules.MORE_THAN_ONE_SUBGRAPH, f"reads the output of op {b.index} {b.name}, which runs on the "
                                                            "CPU after the Edge TPU segment",
                              f"nothing of its own: it maps once op {root.index} {root.name} does")
        row = OpPrediction(op.index, op.name, op.version, problem.status, problem.reason, False, op.is_custom,
                           advice=problem.advice, follows=None if cause[op.index] == op.index else cause[op.index])
        rows.append(row)
        if first_fallback is None and problem.status != rules.MORE_THAN_ONE_SUBGRAPH and not _is_io_wrapper(op, info):
            first_fallback = row
    return Preflight(rows, first_fallback, model_fatal(info), runtime)


def model_fatal(info: ModelInfo) -> Optional[str]:
    """Why the compiler would refuse the whole model (no output at all), and what to change; or None."""
    for op, limit in ops_over_version(info, rules.MAX_PARSED_VERSION)[:1]:
        return (f"Model could not be parsed: op {op.index} {op.name} v{op.version} is newer than compiler 16 "
                f"parses (up to v{limit}); {version_advice(op, info, limit)}")
    for t in dynamic_tensors(info)[:1]:
        return (f"dynamic-sized tensor {t.name!r} {list(t.shape_signature)}: the compiler refuses graphs with "
                f"dynamic-sized tensors; {static_advice(info)}")
    if not any(t.dtype in rules.EIGHT_BIT for t in info.tensors):
        return "Model not quantized: no int8/uint8 tensor; export with full-integer quantization (--int8)"
    return None


def _is_io_wrapper(op: OpInfo, info: ModelInfo) -> bool:
    """A float<->int conversion at the model's edge: it runs on the CPU without splitting the graph."""
    if op.name == "QUANTIZE" and op.inputs and op.inputs[0] in info.inputs:
        return True
    return op.name == "DEQUANTIZE" and bool(op.outputs) and op.outputs[0] in info.outputs


def table(preflight: Preflight) -> str:
    """The prediction in the compiler's own log layout (Operator, Count, Status), then what to change for the ops
    it would leave on the CPU, then the headline."""
    counts: Dict[Tuple[str, str], int] = {}
    for r in preflight.rows:
        counts[(r.log_op, r.status)] = counts.get((r.log_op, r.status), 0) + 1
    lines = [f"{'Operator':<31}{'Count':<11}Status"]
    lines += [f"{op:<31}{n:<11}{status}" for (op, status), n in counts.items()]
    entries = preflight.advice()
    if entries:
        lines.append("What to change (each op the Edge TPU would not run, the rule it breaks, the change):")
    for e in entries:
        lines.append(f"  {e['heading']}: {e['status']}: {e['reason']}")
        lines.append(f"      change: {e['advice']}")
    lines += [f"  op {r.index} {r.op} v{r.version}: {r.reason}" for r in preflight.rows if r.tail]
    lines.append(preflight.headline())
    return "\n".join(lines)


def advice_heading(entry: dict) -> str:
    """Which ops an advice entry covers, as the table and the report name them: `op 5 HARD_SWISH v1 (first fallback)`,
    `ops 9, 14-16 HARD_SWISH v1 (4 ops)`."""
    ops = entry["ops"]
    name = entry["op"] + (f" v{entry['version']}" if entry["version"] else "")
    if len(ops) == 1:
        return f"op {ops[0]} {name}" + (" (first fallback)" if entry["first"] is not None else "")
    first = f", the first fallback at op {entry['first']}" if entry["first"] is not None else ""
    return f"ops {entry['where']} {name} ({len(ops)} ops{first})"


def _ranges(indices: List[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'."""
    spans: List[List[int]] = []
    for i in sorted(indices):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
