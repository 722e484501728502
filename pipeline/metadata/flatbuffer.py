"""A ModelDescription as the TFLite metadata flatbuffer (metadata_schema.fbs, root ModelMetadata, identifier "M001").

    blob = encode(described)      # bytes for the model's TFLITE_METADATA buffer

Written with the `flatbuffers` package's Builder, table by table. The slot numbers are the fields' positions
in the schema's table declarations (a union takes two: its type, then its table), and must never change:
readers index the vtable by them. min_parser_version is set as the schema's own tooling decides it: the
newest schema version among the members used, 1.0.0 when none newer is used.
"""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence, Tuple

import flatbuffers

from pipeline.metadata.description import (AssociatedFile, BoundingBoxContent, FeatureContent, FileType, ImageContent,
                                           ModelDescription, Normalization, ScoreCalibration, ScoreThreshold, Stats,
                                           Tensor)

IDENTIFIER = b"M001"
BASE_VERSION = (1, 0, 0)

# Union members, by the schema's numbers (0 is NONE).
_FEATURE, _IMAGE, _BOUNDING_BOX = 1, 2, 3  # ContentProperties
_NORMALIZATION, _SCORE_CALIBRATION, _SCORE_THRESHOLD = 1, 2, 3  # ProcessUnitOptions

# The schema version that introduced a member we can write (older members are 1.0.0).
_FILE_TYPE_VERSIONS = {FileType.VOCABULARY: (1, 0, 1), FileType.SCANN_INDEX_FILE: (1, 4, 0)}
_FILE_VERSION_FIELD = (1, 4, 1)  # AssociatedFile.version


def encode(described: ModelDescription) -> bytes:
    """The metadata flatbuffer of `described`; ValueError naming the field when a value cannot be written."""
    _check(described)
    b = flatbuffers.Builder(1024)
    b.Finish(_model(b, described), file_identifier=IDENTIFIER)
    return bytes(b.Output())


def min_parser_version(described: ModelDescription) -> str:
    """The oldest metadata parser that understands every field `described` uses."""
    newest = BASE_VERSION
    for f in _every_file(described):
        newest = max(newest, _FILE_TYPE_VERSIONS.get(f.type, BASE_VERSION))
        if f.version is not None:
            newest = max(newest, _FILE_VERSION_FIELD)
    return ".".join(str(n) for n in newest)


def _every_file(described: ModelDescription) -> List[AssociatedFile]:
    return list(described.files) + [f for t in described.inputs + described.outputs for f in t.files]


def _check(described: ModelDescription) -> None:
    for f in _every_file(described):
        if not f.name or "/" in f.name or "\\" in f.name:
            raise ValueError(f"associated file name {f.name!r}: expected a bare file name (it is its name in the model's zip)")
    for tensor in described.inputs + described.outputs:
        for unit in tensor.process_units:
            if isinstance(unit, Normalization):
                values = tuple(unit.mean) + tuple(unit.std)
                if not unit.mean or not unit.std or not all(math.isfinite(v) for v in values) or 0 in unit.std:
                    raise ValueError(f"tensor {tensor.name!r}: normalization mean {list(unit.mean)}, std {list(unit.std)}; "
                                     "expected finite values, at least one of each, and no zero std")
        if isinstance(tensor.content, BoundingBoxContent) and tensor.content.index and sorted(tensor.content.index) != [0, 1, 2, 3]:
            raise ValueError(f"tensor {tensor.name!r}: bounding box index {list(tensor.content.index)}, expected an order of 0, 1, 2, 3")


# --- tables, children first: a flatbuffer table's strings, vectors and sub-tables are written before it ---

def _table(b: flatbuffers.Builder, slots: int, fields: Sequence[Tuple[int, Callable, object]]) -> int:
    """One table: `fields` are (slot, Builder.Prepend...Slot, value); None values are left out (the schema's default)."""
    b.StartObject(slots)
    for slot, prepend, value in fields:
        if value is not None:
            prepend(b, slot, value, None)  # no default: a value given is always written
    return b.EndObject()


def _offset(b, slot, value, _):
    b.PrependUOffsetTRelativeSlot(slot, value, 0)


def _byte(b, slot, value, _):
    b.PrependInt8Slot(slot, int(value), -1)  # -1: never equal, so even 0 is written


def _ubyte(b, slot, value, _):
    b.PrependUint8Slot(slot, int(value), 255)


def _uint(b, slot, value, _):
    b.PrependUint32Slot(slot, int(value), 0xFFFFFFFF)


def _int(b, slot, value, _):
    b.PrependInt32Slot(slot, int(value), -(2 ** 31))


def _float(b, slot, value, _):
    b.PrependFloat32Slot(slot, float(value), math.nan)


def _string(b: flatbuffers.Builder, text: Optional[str]) -> Optional[int]:
    return None if text is None else b.CreateString(text)


def _offsets(b: flatbuffers.Builder, offsets: Sequence[int]) -> Optional[int]:
    if not offsets:
        return None
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _scalars(b: flatbuffers.Builder, values: Sequence, prepend: str) -> Optional[int]:
    if not values:
        return None
    b.StartVector(4, len(values), 4)
    for v in reversed(values):
        getattr(b, prepend)(v)
    return b.EndVector()


def _model(b: flatbuffers.Builder, d: ModelDescription) -> int:
    name, description, version = _string(b, d.name), _string(b, d.description), _string(b, d.version)
    subgraph = _offsets(b, [_subgraph(b, d)])
    author, license_ = _string(b, d.author), _string(b, d.license)
    files = _files(b, d.files)
    parser = _string(b, min_parser_version(d))
    return _table(b, 8, [(0, _offset, name), (1, _offset, description), (2, _offset, version), (3, _offset, subgraph),
                         (4, _offset, author), (5, _offset, license_), (6, _offset, files), (7, _offset, parser)])


def _subgraph(b: flatbuffers.Builder, d: ModelDescription) -> int:
    inputs = _offsets(b, [_tensor(b, t) for t in d.inputs])
    outputs = _offsets(b, [_tensor(b, t) for t in d.outputs])
    return _table(b, 10, [(2, _offset, inputs), (3, _offset, outputs)])


def _tensor(b: flatbuffers.Builder, t: Tensor) -> int:
    name, description = _string(b, t.name), _string(b, t.description)
    dims = _offsets(b, [b.CreateString(n) for n in t.dimension_names])
    content = _content(b, t.content) if t.content is not None else None
    units = _offsets(b, [_process_unit(b, u) for u in t.process_units])
    stats = _stats(b, t.stats) if t.stats is not None else None
    files = _files(b, t.files)
    return _table(b, 7, [(0, _offset, name), (1, _offset, description), (2, _offset, dims), (3, _offset, content),
                         (4, _offset, units), (5, _offset, stats), (6, _offset, files)])


def _content(b: flatbuffers.Builder, c) -> int:
    if isinstance(c, ImageContent):
        size = None
        if c.default_size is not None:
            size = _table(b, 2, [(0, _uint, c.default_size[0]), (1, _uint, c.default_size[1])])
        kind, properties = _IMAGE, _table(b, 2, [(0, _byte, c.color_space), (1, _offset, size)])
    elif isinstance(c, BoundingBoxContent):
        index = _scalars(b, [int(i) for i in c.index], "PrependUint32")
        kind, properties = _BOUNDING_BOX, _table(b, 3, [(0, _offset, index), (1, _byte, c.type), (2, _byte, c.coordinates)])
    elif isinstance(c, FeatureContent):
        kind, properties = _FEATURE, _table(b, 0, [])
    else:
        raise ValueError(f"tensor content {c!r}: expected FeatureContent, ImageContent or BoundingBoxContent")
    value_range = None
    if c.range is not None:
        value_range = _table(b, 2, [(0, _int, c.range[0]), (1, _int, c.range[1])])
    return _table(b, 3, [(0, _ubyte, kind), (1, _offset, properties), (2, _offset, value_range)])


def _process_unit(b: flatbuffers.Builder, u) -> int:
    if isinstance(u, Normalization):
        mean = _scalars(b, [float(v) for v in u.mean], "PrependFloat32")
        std = _scalars(b, [float(v) for v in u.std], "PrependFloat32")
        kind, options = _NORMALIZATION, _table(b, 2, [(0, _offset, mean), (1, _offset, std)])
    elif isinstance(u, ScoreCalibration):
        kind, options = _SCORE_CALIBRATION, _table(b, 2, [(0, _byte, u.transform), (1, _float, u.default_score)])
    elif isinstance(u, ScoreThreshold):
        kind, options = _SCORE_THRESHOLD, _table(b, 1, [(0, _float, u.threshold)])
    else:
        raise ValueError(f"process unit {u!r}: expected Normalization, ScoreCalibration or ScoreThreshold")
    return _table(b, 2, [(0, _ubyte, kind), (1, _offset, options)])


def _stats(b: flatbuffers.Builder, s: Stats) -> int:
    high = _scalars(b, [float(v) for v in s.max], "PrependFloat32")
    low = _scalars(b, [float(v) for v in s.min], "PrependFloat32")
    return _table(b, 2, [(0, _offset, high), (1, _offset, low)])


def _files(b: flatbuffers.Builder, files: Sequence[AssociatedFile]) -> Optional[int]:
    return _offsets(b, [_file(b, f) for f in files])


def _file(b: flatbuffers.Builder, f: AssociatedFile) -> int:
    name, description = _string(b, f.name), _string(b, f.description)
    locale, version = _string(b, f.locale), _string(b, f.version)
    return _table(b, 5, [(0, _offset, name), (1, _offset, description), (2, _byte, f.type), (3, _offset, locale),
                         (4, _offset, version)])
