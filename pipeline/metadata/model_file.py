"""Put a metadata flatbuffer and its files into a .tflite model, as TFLite's metadata tooling lays them out.

    model = attach(model_bytes, metadata_blob, [("labels.txt", b"cat\\ndog\\n")])
    carried(model)        # (metadata_blob, [("labels.txt", b"cat\\ndog\\n")])

The metadata goes in a buffer of its own, named by a `Model.metadata` entry "TFLITE_METADATA" (an entry of
that name already there gets the new buffer); the files go in a zip appended after the model's flatbuffer,
stored uncompressed (readers map them in place) and dated 1980-01-01 with fixed attributes, so packing the
same files twice gives the same bytes. The model is rewritten through TensorFlow's object API for the TFLite
schema (every table unpacked and packed again; host only): its ops, tensors and buffers are unchanged.
"""
from __future__ import annotations

import io
import zipfile
from typing import List, Optional, Sequence, Tuple

import flatbuffers

METADATA_NAME = "TFLITE_METADATA"
MODEL_IDENTIFIER = b"TFL3"
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest date: no clock in the bytes
_FILE_MODE = 0o644 << 16  # unix permissions in the high half of external_attr, as zip tools write them
_UNIX = 3  # ZipInfo.create_system: the same on every machine that packs


def _schema():
    from tensorflow.lite.python import schema_py_generated

    return schema_py_generated


def attach(model: bytes, metadata: bytes, files: Sequence[Tuple[str, bytes]]) -> bytes:
    """`model` carrying `metadata` as its TFLITE_METADATA buffer and exactly `files` in its appended zip.
    Whatever zip the model had is replaced. ValueError when `model` is not a TFLite flatbuffer."""
    schema = _schema()
    tree = _unpack(schema, model)
    buffer = schema.BufferT()
    buffer.data = bytearray(metadata)
    entries = [m for m in (tree.metadata or []) if _name(m) == METADATA_NAME]
    if entries:
        tree.buffers[entries[0].buffer] = buffer
        for extra in entries[1:]:  # one metadata per model: later entries of the name would contradict the first
            tree.metadata.remove(extra)
    else:
        tree.buffers = list(tree.buffers or []) + [buffer]
        entry = schema.MetadataT()
        entry.name, entry.buffer = METADATA_NAME, len(tree.buffers) - 1
        tree.metadata = list(tree.metadata or []) + [entry]
    builder = flatbuffers.Builder(max(1024, len(model) + len(metadata) + 1024))
    builder.Finish(tree.Pack(builder), file_identifier=MODEL_IDENTIFIER)
    return _with_zip(bytes(builder.Output()), files)


def carried(model: bytes) -> Tuple[Optional[bytes], List[Tuple[str, bytes]]]:
    """The model's TFLITE_METADATA buffer (None when it has none) and the files in its appended zip."""
    schema = _schema()
    root = _root(schema, model)
    blob = None
    for i in range(root.MetadataLength()):
        entry = root.Metadata(i)
        if entry.Name().decode("utf-8", "replace") == METADATA_NAME:
            blob = root.Buffers(entry.Buffer()).DataAsNumpy().tobytes()
            break
    files: List[Tuple[str, bytes]] = []
    try:
        with zipfile.ZipFile(io.BytesIO(model)) as archive:
            files = [(name, archive.read(name)) for name in archive.namelist()]
    except zipfile.BadZipFile:
        pass  # no zip appended: a model without packed files
    return blob, files


def _with_zip(flat: bytes, files: Sequence[Tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    out.write(flat)
    if files:
        # Written after the flatbuffer in the same stream, so the zip's offsets count from the model's first byte.
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
            for name, data in files:
                info = zipfile.ZipInfo(name, date_time=_FIXED_DATE)
                info.external_attr, info.create_system = _FILE_MODE, _UNIX
                archive.writestr(info, data)
    return out.getvalue()


def _root(schema, model: bytes):
    if len(model) < 8 or model[4:8] != MODEL_IDENTIFIER:
        raise ValueError(f"not a TFLite model: expected {MODEL_IDENTIFIER!r} at bytes 4..8, got {bytes(model[4:8])!r}")
    return schema.Model.GetRootAs(model, 0)


def _unpack(schema, model: bytes):
    root = _root(schema, model)
    for i in range(root.BuffersLength()):
        if root.Buffers(i).Offset() > 1:  # data kept after the flatbuffer (models over 2 GB): rewriting would lose it
            raise ValueError("the model keeps its weights outside the flatbuffer (a model over 2 GB); "
                             "expected one whose buffers are inside it")
    return schema.ModelT.InitFromObj(root)


def _name(entry) -> str:
    name = entry.name
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
