"""Check a .tflite file structurally before an interpreter sees it.

    from edge.model.check import check_model
    info = check_model(Path("model_int8.tflite").read_bytes())   # ModelCheckError if damaged

The Python wrappers of the TFLite interpreters build the model without the flatbuffer
verifier, so a damaged file can kill the process (SIGSEGV/SIGBUS on about a third of randomly
damaged files, measured: 19 of 60 damaged copies of a small int8 model). This module does the verifier's job for the parts the interpreter
reads: every table, vector and string lies inside the file; every index (opcode, tensor,
buffer, subgraph) is in range; constant tensors hold exactly shape x itemsize bytes;
quantization parameters are finite and fit their tensor. Then edge.model.tflite_file.read_model
gives the model's description. It does not prove the weights are the right ones: that is
the sha256 check's job (edge.model.integrity).
"""
from __future__ import annotations

import math
import struct
from typing import Any, List, Optional

from edge.errors import BackendUnavailable, ModelCheckError
from edge.model.quant_rules import Quantized, operator_problem
from edge.model.tflite_file import FILE_IDENTIFIER

SCHEMA_VERSION = 3

# TensorType -> bytes per element (schema.fbs order). None: no fixed size (STRING, RESOURCE, VARIANT).
_ITEMSIZE = {
    0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 5: None, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8,
    11: 16, 12: 8, 13: None, 14: None, 15: 4, 16: 2, 17: None, 18: 2,
}
_INT4 = 17
_QUANT_RANGE = {3: (0, 255), 9: (-128, 127), 7: (-32768, 32767), 2: (-(2 ** 31), 2 ** 31 - 1), 4: (-(2 ** 63), 2 ** 63 - 1), 16: (0, 65535), 17: (-8, 7)}
_MAX_BUILTIN = 400  # well above the ~210 builtins of TF 2.21; a damaged code is far larger or negative
_MAX_TENSOR_BYTES = 1 << 32
# Quantization scales an interpreter survives (measured with tests/tests.support.quant_mutants.py on ai-edge-litert 2.3.0 and
# TF 2.21's interpreter, docs/trust.md): zero and denormal scales end in SIGSEGV on an input, output or
# activation tensor, so every scale must be a normal float32. A tensor computed at run time gets a higher floor:
# its scale divides the others' in the kernels' requantization multipliers, which abort when out of range;
# real models go as low as 7.8e-9 there (MobileNetV2's dead ReLU6 channels), constants (biases) to 6.6e-13.
_MIN_SCALE = 1.1754943508222875e-38  # the smallest normal float32
_MIN_ACTIVATION_SCALE = 1e-10
_MAX_SCALE = 1e30  # far above any real scale (at most ~1e3); a product of two must stay finite in float32


class _Reader:
    """Bounds-checked reads of flatbuffer tables, vectors and strings from the raw bytes."""

    def __init__(self, buf: bytes, name: str):
        self.buf = buf
        self.n = len(buf)
        self.name = name

    def fail(self, what: str) -> None:
        raise ModelCheckError(f"{self.name} is damaged or not a valid .tflite: {what}")

    def _u(self, fmt: str, pos: int, what: str) -> int:
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > self.n:
            self.fail(f"{what} at byte {pos} lies outside the file ({self.n} bytes)")
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def root(self, identifier: bytes, what: str, schema: str = "") -> "_Table":
        """The root table, after checking the buffer is long enough and carries `identifier`."""
        if self.n < 8:
            self.fail(f"{self.n} bytes, too short for a flatbuffer")
        if self.buf[4:8] != identifier:
            self.fail(f"file identifier {self.buf[4:8]!r}, expected {identifier!r}{schema}")
        return self.table(self._u("<I", 0, "root offset"), what)

    def table(self, pos: int, what: str) -> "_Table":
        if pos % 4:
            self.fail(f"{what} table at byte {pos} is misaligned")
        soffset = self._u("<i", pos, what)
        vtable = pos - soffset
        vt_len = self._u("<H", vtable, f"{what} vtable")
        tbl_len = self._u("<H", vtable + 2, f"{what} vtable")
        if vt_len < 4 or vt_len % 2 or vtable + vt_len > self.n:
            self.fail(f"{what} vtable at byte {vtable} has length {vt_len}, expected an even length inside the file")
        if tbl_len < 4 or pos + tbl_len > self.n:
            self.fail(f"{what} table at byte {pos} has length {tbl_len}, runs past the end of the file")
        fields = []
        for k in range((vt_len - 4) // 2):
            off = self._u("<H", vtable + 4 + 2 * k, what)
            if off and off >= tbl_len:
                self.fail(f"{what} field {k} at offset {off} lies outside its table of {tbl_len} bytes")
            fields.append(off)
        return _Table(self, pos, fields, what)


class _Table:
    def __init__(self, reader: _Reader, pos: int, fields: List[int], what: str):
        self.r, self.pos, self.fields, self.what = reader, pos, fields, what

    def _field(self, k: int) -> int:
        return self.fields[k] if k < len(self.fields) else 0

    def scalar(self, k: int, fmt: str, default: int = 0) -> Any:
        off = self._field(k)
        if not off:
            return default
        return self.r._u(fmt, self.pos + off, f"{self.what} field {k}")

    def _target(self, k: int) -> Optional[int]:
        off = self._field(k)
        if not off:
            return None
        at = self.pos + off
        return at + self.r._u("<I", at, f"{self.what} field {k}")

    def table(self, k: int, what: str) -> Optional[_Table]:
        target = self._target(k)
        return None if target is None else self.r.table(target, what)

    def vector(self, k: int, fmt: str, what: str) -> list:
        """The vector's elements (scalars), after checking it lies inside the file."""
        start = self._target(k)
        if start is None:
            return []
        length = self.r._u("<I", start, what)
        size = struct.calcsize(fmt)
        if start + 4 + length * size > self.r.n:
            self.r.fail(f"{what}: {length} elements at byte {start} run past the end of the file ({self.r.n} bytes)")
        if fmt == "<B":
            return [length]  # byte blobs: only the extent matters; callers want the length
        return list(struct.unpack_from("<%d%s" % (length, fmt[1:]), self.r.buf, start + 4))

    def blob_length(self, k: int, what: str) -> int:
        vec = self.vector(k, "<B", what)
        return vec[0] if vec else 0

    def string(self, k: int, what: str) -> Optional[str]:
        start = self._target(k)
        if start is None:
            return None
        length = self.r._u("<I", start, what)
        if start + 4 + length + 1 > self.r.n:
            self.r.fail(f"{what}: string of {length} bytes at byte {start} runs past the end of the file")
        try:
            # The interpreters decode names as UTF-8 when asked for tensor details, and raise on bad bytes.
            return self.r.buf[start + 4:start + 4 + length].decode("utf-8")
        except UnicodeDecodeError:
            self.r.fail(f"{what} at byte {start} is not valid UTF-8")
            raise  # unreachable: fail() raises

    def tables(self, k: int, what: str) -> List[_Table]:
        start = self._target(k)
        if start is None:
            return []
        length = self.r._u("<I", start, what)
        if start + 4 + 4 * length > self.r.n:
            self.r.fail(f"{what}: {length} entries at byte {start} run past the end of the file")
        out = []
        for i in range(length):
            at = start + 4 + 4 * i
            out.append(self.r.table(at + self.r._u("<I", at, what), f"{what}[{i}]"))
        return out


def _check_structure(buf: bytes, name: str) -> None:
    r = _Reader(buf, name)
    model = r.root(FILE_IDENTIFIER, "model")
    version = model.scalar(0, "<I")
    if version != SCHEMA_VERSION:
        r.fail(f"schema version {version}, expected {SCHEMA_VERSION}")

    opcodes = model.tables(1, "operator_codes")
    for i, code in enumerate(opcodes):
        builtin = max(code.scalar(0, "<b"), code.scalar(3, "<i"))
        if not 0 <= builtin <= _MAX_BUILTIN:
            r.fail(f"operator_codes[{i}] has builtin code {builtin}, expected 0..{_MAX_BUILTIN}")
        custom = code.string(1, f"operator_codes[{i}].custom_code")
        if builtin == 32 and not custom:
            r.fail(f"operator_codes[{i}] is CUSTOM without a custom code")
        if code.scalar(2, "<i", 1) < 1:
            r.fail(f"operator_codes[{i}] has version {code.scalar(2, '<i', 1)}, expected >= 1")

    buffers = model.tables(4, "buffers")
    buffer_sizes = []
    for i, b in enumerate(buffers):
        size = b.blob_length(0, f"buffers[{i}].data")
        offset, ext_size = b.scalar(1, "<Q"), b.scalar(2, "<Q")
        if offset > 1:  # data stored after the flatbuffer (models over 2 GB); offset 1 means "none"
            if offset + ext_size > len(buf):
                r.fail(f"buffers[{i}] spans bytes {offset}..{offset + ext_size}, outside the file ({len(buf)} bytes)")
            size = ext_size
        buffer_sizes.append(size)

    subgraphs = model.tables(2, "subgraphs")
    if not subgraphs:
        r.fail("no subgraphs, expected at least one")
    for g, sub in enumerate(subgraphs):
        where = f"subgraphs[{g}]"
        tensors = sub.tables(0, f"{where}.tensors")
        n_tensors = len(tensors)
        scales = [_check_tensor(r, tensor, f"{where}.tensors[{t}]", buffer_sizes) for t, tensor in enumerate(tensors)]
        for field, label in ((1, "inputs"), (2, "outputs")):
            for idx in sub.vector(field, "<i", f"{where}.{label}"):
                if not 0 <= idx < n_tensors:
                    r.fail(f"{where}.{label} names tensor {idx}, expected 0..{n_tensors - 1}")
        for o, op in enumerate(sub.tables(3, f"{where}.operators")):
            at = f"{where}.operators[{o}]"
            code = op.scalar(0, "<I")
            if code >= len(opcodes):
                r.fail(f"{at} uses operator code {code}, expected 0..{len(opcodes) - 1}")
            for field, label in ((1, "inputs"), (2, "outputs"), (8, "intermediates")):
                for idx in op.vector(field, "<i", f"{at}.{label}"):
                    if not -1 <= idx < n_tensors:  # -1: an optional input left out
                        r.fail(f"{at}.{label} names tensor {idx}, expected -1..{n_tensors - 1}")
            problem = operator_problem(max(opcodes[code].scalar(0, "<b"), opcodes[code].scalar(3, "<i")),
                                       [scales[i] if i >= 0 else None for i in op.vector(1, "<i", at)],
                                       [scales[i] for i in op.vector(2, "<i", at)])
            if problem:
                r.fail(f"{at}: {problem} (an interpreter aborts on it)")
            for field in (4, 12):  # builtin_options, builtin_options_2 (unions of tables)
                if op.scalar(field - 1, "<B"):
                    op.table(field, f"{at} options")
            op.blob_length(5, f"{at}.custom_options")
            op.blob_length(7, f"{at}.mutating_variable_inputs")
            big_offset, big_size = op.scalar(9, "<Q"), op.scalar(10, "<Q")
            if big_offset and big_offset + big_size > len(buf):
                r.fail(f"{at} custom options span bytes {big_offset}..{big_offset + big_size}, outside the file")
        sub.string(4, f"{where}.name")

    model.string(3, "description")
    for idx in model.vector(5, "<i", "metadata_buffer"):
        if not 0 <= idx < len(buffers):
            r.fail(f"metadata_buffer names buffer {idx}, expected 0..{len(buffers) - 1}")
    for i, meta in enumerate(model.tables(6, "metadata")):
        meta.string(0, f"metadata[{i}].name")
        if meta.scalar(1, "<I") >= len(buffers):
            r.fail(f"metadata[{i}] names buffer {meta.scalar(1, '<I')}, expected 0..{len(buffers) - 1}")
    for i, sig in enumerate(model.tables(7, "signature_defs")):
        sub_index = sig.scalar(4, "<I")
        if sub_index >= len(subgraphs):
            r.fail(f"signature_defs[{i}] names subgraph {sub_index}, expected 0..{len(subgraphs) - 1}")
        n_tensors = len(subgraphs[sub_index].tables(0, "tensors"))
        sig.string(2, f"signature_defs[{i}].signature_key")
        for field in (0, 1):
            for j, tmap in enumerate(sig.tables(field, f"signature_defs[{i}] tensor map")):
                tmap.string(0, f"signature_defs[{i}] tensor name")
                if tmap.scalar(1, "<I") >= n_tensors:
                    r.fail(f"signature_defs[{i}] names tensor {tmap.scalar(1, '<I')}, expected 0..{n_tensors - 1}")


def _check_tensor(r: _Reader, tensor: _Table, at: str, buffer_sizes: List[int]) -> Optional[Quantized]:
    """Check one tensor; return its quantization (None when it has none)."""
    shape = tensor.vector(0, "<i", f"{at}.shape")
    dtype = tensor.scalar(1, "<b")
    if dtype not in _ITEMSIZE:
        r.fail(f"{at} has type code {dtype}, expected 0..{max(_ITEMSIZE)}")
    if any(d < 0 for d in shape):
        r.fail(f"{at} has shape {tuple(shape)}, expected non-negative sizes")
    signature = tensor.vector(7, "<i", f"{at}.shape_signature")
    if signature and (len(signature) != len(shape) or any(d < -1 for d in signature)):
        r.fail(f"{at} has shape signature {tuple(signature)} for shape {tuple(shape)}")
    buffer = tensor.scalar(2, "<I")
    if buffer >= len(buffer_sizes):
        r.fail(f"{at} names buffer {buffer}, expected 0..{len(buffer_sizes) - 1}")
    count = math.prod(shape) if shape else 1
    itemsize = _ITEMSIZE[dtype]
    if itemsize is not None and count * itemsize > _MAX_TENSOR_BYTES:
        r.fail(f"{at} has shape {tuple(shape)}: {count * itemsize} bytes, more than a device model can hold")
    data_size = buffer_sizes[buffer]
    if data_size:
        expected = (count + 1) // 2 if dtype == _INT4 else (count * itemsize if itemsize else None)
        if expected is not None and data_size != expected:
            r.fail(f"{at} is constant with shape {tuple(shape)}: buffer holds {data_size} bytes, expected {expected}")
    tensor.string(3, f"{at}.name")
    if tensor._field(6):
        r.fail(f"{at} is a sparse tensor; edge/ does not load sparse models")
    if tensor._field(9):
        r.fail(f"{at} is a variant tensor; edge/ does not load models with variant tensors")
    quant = tensor.table(4, f"{at}.quantization")
    if quant is not None:
        scales = quant.vector(2, "<f", f"{at}.quantization.scale")
        zeros = quant.vector(3, "<q", f"{at}.quantization.zero_point")
        quant.vector(0, "<f", f"{at}.quantization.min")
        quant.vector(1, "<f", f"{at}.quantization.max")
        if quant.scalar(4, "<B"):
            quant.table(5, f"{at}.quantization.details")
        constant = bool(data_size)
        floor = _MIN_SCALE if constant else _MIN_ACTIVATION_SCALE
        bad = [x for x in scales if not (math.isfinite(x) and floor <= x <= _MAX_SCALE)]
        if bad:
            kind = "a constant" if constant else "a tensor computed at run time"
            r.fail(f"{at} has quantization scale {bad[0]!r}; expected a finite number from {floor:g} to {_MAX_SCALE:g} "
                   f"for {kind} (an interpreter aborts or crashes on a zero, denormal or tiny scale)")
        if zeros and not scales:
            r.fail(f"{at} has {len(zeros)} zero points and no scales, expected as many of each")
        if scales and len(zeros) != len(scales):
            r.fail(f"{at} has {len(scales)} scales and {len(zeros)} zero points, expected as many of each")
        low, high = _QUANT_RANGE.get(dtype, (-(2 ** 63), 2 ** 63 - 1))
        if any(not low <= z <= high for z in zeros):
            r.fail(f"{at} has zero points {zeros[:4]}, expected {low}..{high} for its type")
        axis = quant.scalar(6, "<i")
        if not 0 <= axis < max(len(shape), 1):
            r.fail(f"{at} has quantized dimension {axis}, expected 0..{max(len(shape), 1) - 1} for shape {tuple(shape)}")
        if len(scales) > 1 and not (axis < len(shape) and shape[axis] == len(scales)):
            r.fail(f"{at} has {len(scales)} per-channel scales on axis {axis} of shape {tuple(shape)}")
        return Quantized(dtype, scales, zeros, constant) if scales else None
    return None


def check_model(data: bytes, name: str = "model") -> Any:
    """Check the bytes of a .tflite model; return its edge.model.tflite_file.ModelInfo or raise ModelCheckError."""
    from edge.model.tflite_file import ModelFileError, ReaderUnavailable, read_model

    _check_structure(bytes(data), name)
    try:
        info = read_model(bytes(data))
    except ReaderUnavailable as err:
        raise BackendUnavailable(f"cannot check {name}: {err}") from err
    except ModelFileError as err:
        raise ModelCheckError(f"{name} is not a readable .tflite: {err}") from err
    except Exception as err:  # noqa: BLE001 - a reader on damaged bytes can fail in any way; report, don't crash
        raise ModelCheckError(f"{name} is damaged: reading it failed with {type(err).__name__}: {err}") from err
    return info
