"""Parse what edgetpu_compiler prints and the operation log it writes.

Layouts from Coral's documentation and public compiler logs (docs/edgetpu-sources.md):
compilers 2.0 to 16, sizes in B/KiB/MiB, an operator table that can list one operator on several
rows with different statuses, and the fatal messages that end a compile.
"""
from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Optional

_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
_SIZE = r"([0-9.]+)\s*(B|KiB|MiB|GiB)"

# Messages that end a compile without a model, most specific first, worded as the compiler prints them.
_FATAL = [
    (re.compile(r"Didn't find op for builtin opcode '([A-Z0-9_]+)' version '(\d+)'"),
     lambda m: f"op {m.group(1)} version {m.group(2)} is too new for this compiler (Model could not be parsed)"),
    (re.compile(r"^Model not quantized", re.M), lambda m: "model not quantized"),
    (re.compile(r"^Model could not be parsed", re.M), lambda m: "model could not be parsed"),
    (re.compile(r"Encountered unresolved custom op: ([^.\s]+)"), lambda m: f"unresolved custom op {m.group(1)}"),
    (re.compile(r"large activation tensors"), lambda m: "large activation tensors in the model"),
    (re.compile(r"static-sized tensors with a graph that has dynamic-sized tensors"),
     lambda m: "the model has dynamic-sized tensors (export it at a fixed batch of 1)"),
    (re.compile(r"Internal compiler error"), lambda m: "internal compiler error (it has been seen to succeed on a retry)"),
    (re.compile(r"^Compilation failed: (.+)$", re.M), lambda m: m.group(1).strip()),
    (re.compile(r"^Invalid model: .*\n(.+)$", re.M), lambda m: f"invalid model: {m.group(1).strip()}"),
    (re.compile(r"^Compilation failed!?\s*$", re.M), lambda m: "compilation failed (the compiler gave no reason)"),
]


class OperatorRow(NamedTuple):
    op: str
    count: int
    status: str


class CompilerOutput(NamedTuple):
    version: Optional[str]
    succeeded: bool
    fatal: Optional[str]
    input_model: Optional[str]
    output_model: Optional[str]
    on_chip_used: Optional[int]  # bytes of parameters cached on the chip
    on_chip_remaining: Optional[int]  # compiler 14+; compiler 2.0 prints on_chip_available instead
    off_chip_used: Optional[int]  # bytes of parameters streamed from host memory
    subgraphs: Optional[int]
    total_ops: Optional[int]
    ops_on_edgetpu: Optional[int]
    ops_on_cpu: Optional[int]
    operators: List[OperatorRow]
    on_chip_available: Optional[int] = None  # compiler 2.0's "available" line, before "used"

    def as_dict(self) -> dict:
        d = self._asdict()
        d["operators"] = [r._asdict() for r in self.operators]
        return d


def parse_size(text: str) -> int:
    """'4.21MiB' -> bytes."""
    m = re.fullmatch(_SIZE, text.strip())
    if not m:
        raise ValueError(f"size {text!r}, expected a number and B, KiB, MiB or GiB")
    return int(round(float(m.group(1)) * _UNITS[m.group(2)]))


def _field(text: str, label: str, size: bool = False):
    m = re.search(rf"^{re.escape(label)}:\s*(.+?)\s*$", text, re.M)
    if not m:
        return None
    value = m.group(1)
    if size:
        return parse_size(value)
    return int(value) if value.isdigit() else value


def parse_operator_table(text: str) -> List[OperatorRow]:
    """Rows of the Operator/Count/Status table, split on runs of 2+ spaces, repeated operators kept."""
    rows: List[OperatorRow] = []
    in_table = False
    for line in text.splitlines():
        parts = re.split(r"\s{2,}", line.strip())
        if parts[:3] == ["Operator", "Count", "Status"]:
            in_table = True
            continue
        if in_table and len(parts) == 3 and parts[1].isdigit():
            rows.append(OperatorRow(parts[0], int(parts[1]), parts[2]))
        elif in_table and line.strip() and not parts[0].isupper():
            in_table = False  # a console line after the table
    return rows


def parse(console: str, log: str = "") -> CompilerOutput:
    """Parse the console output and, when given, the .log file written beside the model."""
    version = re.search(r"Edge TPU Compiler version (\S+)", console or log)
    fatal = None
    for pattern, describe in _FATAL:
        m = pattern.search(console)
        if m:
            fatal = describe(m)
            break
    succeeded = fatal is None and ("Model compiled successfully" in console or "Compilation succeeded" in console)
    operators = parse_operator_table(log) or parse_operator_table(console)
    return CompilerOutput(
        version=version.group(1) if version else None,
        succeeded=succeeded,
        fatal=fatal,
        input_model=_field(console, "Input model"),
        output_model=_field(console, "Output model"),
        on_chip_used=_field(console, "On-chip memory used for caching model parameters", size=True),
        on_chip_remaining=_field(console, "On-chip memory remaining for caching model parameters", size=True),
        off_chip_used=_field(console, "Off-chip memory used for streaming uncached model parameters", size=True),
        subgraphs=_field(console, "Number of Edge TPU subgraphs"),
        total_ops=_field(console, "Total number of operations"),
        ops_on_edgetpu=_edgetpu_ops(console, operators),
        ops_on_cpu=_cpu_ops(console, operators),
        operators=operators,
        on_chip_available=_field(console, "On-chip memory available for caching model parameters", size=True),
    )


def _edgetpu_ops(console: str, operators: List[OperatorRow]) -> Optional[int]:
    stated = _field(console, "Number of operations that will run on Edge TPU")
    if stated is not None:
        return stated
    # A fully mapped model prints no such line; the table (or the total) tells.
    if operators:
        return sum(r.count for r in operators if r.status == "Mapped to Edge TPU")
    return _field(console, "Total number of operations")


def _cpu_ops(console: str, operators: List[OperatorRow]) -> Optional[int]:
    stated = _field(console, "Number of operations that will run on CPU")
    if stated is not None:
        return stated
    if operators:
        return sum(r.count for r in operators if r.status != "Mapped to Edge TPU")
    return 0 if _field(console, "Total number of operations") is not None else None


def status_counts(rows) -> Dict[tuple, int]:
    """{(op, status): count} from operator rows or pre-flight predictions, to compare the two."""
    counts: Dict[tuple, int] = {}
    for r in rows:
        key = (r.op, r.status)
        # A compiler row counts `count` ops; a prediction row is one op (NamedTuple.count is a method).
        counts[key] = counts.get(key, 0) + (r.count if isinstance(r, OperatorRow) else 1)
    return counts
