"""What a compiled Edge TPU model holds: per executable, its type, parameter bytes and the compiler's cycle estimate.

    .venv/bin/python bench/edgetpu_cost/compiled_layout.py ../shared/reference/coral/*_edgetpu.tflite

The edgetpu-custom-op's options hold a DarwiNN Package (libedgetpu's executable.fbs): a MultiExecutable of one
STAND_ALONE executable, or a PARAMETER_CACHING executable (the parameters kept on the chip, loaded once) beside an
EXECUTION_ONLY one (whose own parameters are streamed every inference). The parameter bytes of each are the
compiler's memory split: ground truth for the cost model's layout, from Google's own compiled files.
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Dict, List

from flatbuffers import flexbuffers
from flatbuffers.table import Table

TYPES = {0: "STAND_ALONE", 1: "PARAMETER_CACHING", 2: "EXECUTION_ONLY"}


def _table(buf: bytes, pos: int) -> Table:
    return Table(bytearray(buf), pos)


def _root(buf: bytes) -> Table:
    return _table(buf, struct.unpack_from("<I", buf, 0)[0])


def _vector(t: Table, field: int):
    """(start, length) of vector field `field` (0-based), or None."""
    off = t.Offset(4 + 2 * field)
    if not off:
        return None
    return t.Vector(off), t.VectorLen(off)


def _scalar(t: Table, field: int, fmt: str, default=0):
    off = t.Offset(4 + 2 * field)
    return struct.unpack_from(fmt, t.Bytes, t.Pos + off)[0] if off else default


def executables(package: bytes) -> List[Dict]:
    pkg = _root(package)
    start, length = _vector(pkg, 1)  # serialized_multi_executable
    multi = bytes(pkg.Bytes[start:start + length])
    mt = _root(multi)
    vstart, count = _vector(mt, 0)  # serialized_executables: [string]
    out = []
    for i in range(count):
        pos = vstart + 4 * i
        spos = pos + struct.unpack_from("<I", multi, pos)[0]
        slen = struct.unpack_from("<I", multi, spos)[0]
        exe = bytes(multi[spos + 4:spos + 4 + slen])
        et = _root(exe)
        params = _vector(et, 6)
        out.append({"type": TYPES.get(_scalar(et, 13, "<h"), "?"), "parameter_bytes": params[1] if params else 0,
                    "estimated_cycles": _scalar(et, 16, "<q") or _scalar(et, 11, "<i"),
                    "scratch_bytes": _scalar(et, 4, "<i")})
    return out


def layout(path: Path) -> List[List[Dict]]:
    """One list of executables per edgetpu-custom-op in the model."""
    import tflite
    data = path.read_bytes()
    model = tflite.Model.GetRootAsModel(data, 0)
    graph, packages = model.Subgraphs(0), []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).CustomCode() != b"edgetpu-custom-op":
            continue
        value = flexbuffers.GetRoot(op.CustomOptionsAsNumpy().tobytes()).AsMap["4"]
        blob = bytes(value.AsBlob) if value.IsBlob else bytes(flexbuffers.String(value._Indirect(), value._byte_width).Bytes)
        packages.append(executables(blob))
    return packages


def split(path: Path) -> Dict[str, int]:
    """{'cached': bytes, 'streamed': bytes, 'cycles': n} summed over the model's Edge TPU ops."""
    cached = streamed = cycles = 0
    for exes in layout(path):
        for e in exes:
            if e["type"] == "PARAMETER_CACHING":
                cached += e["parameter_bytes"]
            else:
                streamed += e["parameter_bytes"]
            if e["type"] != "PARAMETER_CACHING":
                cycles += e["estimated_cycles"]
    return {"cached": cached, "streamed": streamed, "cycles": cycles}


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(Path(name).name, split(Path(name)), layout(Path(name)))
