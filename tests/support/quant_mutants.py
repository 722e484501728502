"""Mutants of a .tflite model's quantization tables, made in place (same length, no re-serialization), for the
crash-free property of edge.model.check: every word a mutant changes is a scale, a zero point, a vector's length
or a quantized dimension of one tensor.

    fields = quantization_fields(model_bytes)          # where each tensor's quantization words are
    mutant = mutate(model_bytes, fields, rng)          # bytes, with one or a few of those words changed
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from edge.model.check import _Reader  # the bounds-checked flatbuffer reader
from edge.model.tflite_file import FILE_IDENTIFIER


@dataclass(frozen=True)
class QuantFields:
    tensor: str
    scale_at: Optional[int]  # byte offset of the scale vector's length word
    n_scales: int
    zero_at: Optional[int]
    n_zeros: int
    axis_at: Optional[int]  # byte offset of quantized_dimension, when the table stores it


def quantization_fields(buf: bytes) -> List[QuantFields]:
    r = _Reader(buf, "model")
    model = r.root(FILE_IDENTIFIER, "model")
    found = []
    for g, sub in enumerate(model.tables(2, "subgraphs")):
        for t, tensor in enumerate(sub.tables(0, "tensors")):
            quant = tensor.table(4, "quantization")
            if quant is None:
                continue
            scale_at, zero_at = quant._target(2), quant._target(3)
            axis_off = quant._field(6)
            found.append(QuantFields(f"subgraphs[{g}].tensors[{t}]",
                                     scale_at, struct.unpack_from("<I", buf, scale_at)[0] if scale_at else 0,
                                     zero_at, struct.unpack_from("<I", buf, zero_at)[0] if zero_at else 0,
                                     quant.pos + axis_off if axis_off else None))
    return [f for f in found if f.n_scales]


# Scales an interpreter has to survive or the check has to refuse: zero, denormals, tiny, huge, non-finite, negative.
_SCALES = [0.0, -0.0, 1e-45, 1e-40, 1e-38, 1e-30, 1e-20, 1e-15, 1e-12, 1e-10, 1e-9, 1e-8, 1e-6, 1e-3, 0.5, 1.0,
           1e3, 1e6, 1e9, 1e20, 3.4e38, float("inf"), float("-inf"), float("nan"), -1.0, -1e-6]
_ZEROS = [0, 1, -1, 127, 128, -128, -129, 255, 256, 65535, -(2 ** 31), 2 ** 31 - 1, 2 ** 40, -(2 ** 63)]


def mutate(buf: bytes, fields: List[QuantFields], rng: np.random.Generator, words: int = 1) -> bytes:
    out = bytearray(buf)
    for _ in range(words):
        f = fields[int(rng.integers(len(fields)))]
        kind = int(rng.integers(6))
        if kind <= 2 or (kind == 3 and f.zero_at is None) or (kind == 5 and f.axis_at is None):
            i = int(rng.integers(f.n_scales))
            value = _SCALES[int(rng.integers(len(_SCALES)))] if kind < 2 else float(rng.choice([-1, 1]) * 10.0 ** rng.uniform(-46, 38.5))
            struct.pack_into("<f", out, f.scale_at + 4 + 4 * i, value)
        elif kind == 3:
            i = int(rng.integers(f.n_zeros))
            struct.pack_into("<q", out, f.zero_at + 4 + 8 * i, _ZEROS[int(rng.integers(len(_ZEROS)))])
        elif kind == 4:  # a shorter vector (its length word only: the elements stay, the file stays the same size)
            at, n = (f.scale_at, f.n_scales) if rng.integers(2) or f.zero_at is None else (f.zero_at, f.n_zeros)
            struct.pack_into("<I", out, at, int(rng.integers(0, n)) if n > 1 else 0)
        else:
            struct.pack_into("<i", out, f.axis_at, int(rng.choice([-1, 1, 2, 3, 4, 100, -(2 ** 31)])))
    return bytes(out)
