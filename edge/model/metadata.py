"""Read the TFLite metadata a model may carry: normalization of its input, label files of its outputs.

    from edge.model.metadata import read_metadata, associated_file, embedded_record
    meta = read_metadata(Path("mobilenet_v1_0.25_128_quant.tflite").read_bytes())
    meta.mean, meta.std, meta.outputs[0].label_files      # (127.5,), (127.5,), ('imagenet_labels.txt',)
    embedded_record(Path("run/model_int8.tflite").read_bytes())["preprocessing"]   # the pixel contract it carries

Models made with TensorFlow Lite's metadata writer (Coral's newer classifiers among them) hold a
buffer named "TFLITE_METADATA": a flatbuffer of tflite-support's metadata_schema.fbs (root table
ModelMetadata, file identifier "M001"). Files it names (label files, mostly) are packed in a zip
appended to the model. Only what the device side needs is read: names, NormalizationOptions of
each tensor, the colour space of image inputs, associated files (one job, over 300 lines: every
read of the metadata flatbuffer and its zip is bounds-checked here, so a damaged model cannot crash a device). A model without metadata gives
an empty ModelMetadata; metadata that is there but damaged raises ModelCheckError.

Models the pipeline exports also pack `edgeflow_model.json` as one of the model's own files: the
sidecar's facts without the sha256 (labels, image size, input quantization, the pixel contract) and
the run's provenance, so the file alone tells a device how to feed it.
"""
from __future__ import annotations

import io
import math
import zipfile
from typing import List, NamedTuple, Optional, Tuple

from edge.files.bounded import loads_json
from edge.documents.schema import check_version
from edge.errors import ModelCheckError
from edge.model.check import FILE_IDENTIFIER, _Reader, _Table

METADATA_NAME = b"TFLITE_METADATA"
METADATA_IDENTIFIER = b"M001"
EDGEFLOW_RECORD = "edgeflow_model.json"  # the model's own associated file written by `pipeline export`
EDGEFLOW_RECORD_SCHEMA = 1
# Caps on the zip appended to a model (docs/trust.md): its members are label files and edgeflow's own record.
MAX_PACKED_FILES = 64
MAX_PACKED_BYTES = 16 << 20

# metadata_schema.fbs enums, by schema number (1.x; the "M001" identifier promises these stay).
_FILE_TYPES = {0: "UNKNOWN", 1: "DESCRIPTIONS", 2: "TENSOR_AXIS_LABELS", 3: "TENSOR_VALUE_LABELS",
               4: "TENSOR_AXIS_SCORE_CALIBRATION", 5: "VOCABULARY"}
_COLOR_SPACES = {0: "UNKNOWN", 1: "RGB", 2: "GRAYSCALE"}
_NORMALIZATION_OPTIONS = 1  # ProcessUnitOptions union member
_IMAGE_PROPERTIES = 2  # ContentProperties union member

# Field ids (position in the schema's table declaration): the vtable is indexed by these.
_MODEL_NAME, _MODEL_DESCRIPTION, _MODEL_VERSION, _MODEL_SUBGRAPHS, _MODEL_FILES = 0, 1, 2, 3, 6
_MODEL_MIN_PARSER_VERSION = 7
_SUBGRAPH_INPUTS, _SUBGRAPH_OUTPUTS, _SUBGRAPH_FILES = 2, 3, 4
_TENSOR_NAME, _TENSOR_CONTENT, _TENSOR_PROCESS_UNITS, _TENSOR_FILES = 0, 3, 4, 6
_FILE_NAME, _FILE_DESCRIPTION, _FILE_TYPE, _FILE_LOCALE = 0, 1, 2, 3


class AssociatedFile(NamedTuple):
    name: str  # the file's name in the appended zip
    type: str  # AssociatedFileType by name: 'TENSOR_AXIS_LABELS', 'DESCRIPTIONS', ...
    description: Optional[str]
    locale: Optional[str]  # set when a model carries the same labels in several languages


class TensorMetadata(NamedTuple):
    name: Optional[str]
    mean: Optional[Tuple[float, ...]]  # NormalizationOptions: tensor = (value - mean) / std
    std: Optional[Tuple[float, ...]]
    color_space: Optional[str]  # 'RGB' / 'GRAYSCALE' for image tensors, None when not stated
    associated_files: Tuple[AssociatedFile, ...]

    @property
    def label_files(self) -> Tuple[str, ...]:
        """Names of the TENSOR_AXIS_LABELS files, in order (the schema: the first is the default)."""
        return tuple(f.name for f in self.associated_files if f.type == "TENSOR_AXIS_LABELS")


class ModelMetadata(NamedTuple):
    present: bool  # False: the model has no TFLITE_METADATA buffer, every other field is empty
    name: Optional[str] = None
    description: Optional[str] = None
    version: Optional[str] = None
    inputs: Tuple[TensorMetadata, ...] = ()  # one per SubGraph.inputs of subgraph 0, same order
    outputs: Tuple[TensorMetadata, ...] = ()
    associated_files: Tuple[AssociatedFile, ...] = ()  # the model's and subgraph 0's own files
    min_parser_version: Optional[str] = None

    @property
    def mean(self) -> Optional[Tuple[float, ...]]:
        """Normalization mean of the single input; None when not given (or the model has several inputs)."""
        return self.inputs[0].mean if len(self.inputs) == 1 else None

    @property
    def std(self) -> Optional[Tuple[float, ...]]:
        """Normalization std of the single input; None when not given (or the model has several inputs)."""
        return self.inputs[0].std if len(self.inputs) == 1 else None

    def all_files(self) -> List[AssociatedFile]:
        """Every associated file the metadata names: the model's, then each input's and output's."""
        files = list(self.associated_files)
        for tensor in self.inputs + self.outputs:
            files.extend(tensor.associated_files)
        return files


class _MetadataReader(_Reader):
    """model_check's bounds-checked flatbuffer reader, with messages about the metadata, not the file."""

    def fail(self, what: str) -> None:
        # The shared reader words its bounds messages for a whole .tflite; here the bounds are the metadata's.
        raise ModelCheckError(f"{self.name}: {what.replace('the file', 'the metadata')}")


class _ModelFacts(NamedTuple):
    """What the metadata is checked against, from the model's own tables."""

    blob: Optional[bytes]  # the TFLITE_METADATA buffer, None when the model has none
    num_inputs: int
    num_outputs: int
    input_channels: Tuple[Optional[int], ...]  # last dimension of each input tensor


def read_metadata(model_bytes: bytes, name: str = "model") -> ModelMetadata:
    """The model's TFLite metadata; ModelMetadata(present=False) when it has none, ModelCheckError when damaged."""
    data = bytes(model_bytes)
    facts = _model_facts(data, name)
    if facts.blob is None:
        return ModelMetadata(present=False)
    meta = _parse(facts.blob, f"{name}'s TFLite metadata ({METADATA_NAME.decode()}, {len(facts.blob)} bytes)")
    _check_against_model(meta, facts, name)
    _check_files_packed(data, meta, name)
    return meta


def associated_file(model_bytes: bytes, file_name: str, name: str = "model") -> bytes:
    """The bytes of `file_name` from the zip appended to the model; ModelCheckError when absent or damaged."""
    archive = _open_zip(bytes(model_bytes), name, wanted=file_name)
    try:
        with archive:
            info = archive.getinfo(file_name)
            if info.flag_bits & 0x1:
                raise ModelCheckError(f"{name}: packed file {file_name!r} is encrypted; expected the plain files "
                                      "TFLite metadata packs")
            if info.file_size > MAX_PACKED_BYTES:
                raise ModelCheckError(f"{name}: packed file {file_name!r} declares {info.file_size} bytes, more than "
                                      f"the {MAX_PACKED_BYTES} this edgeflow unpacks (docs/trust.md)")
            with archive.open(info) as member:
                data = member.read(MAX_PACKED_BYTES + 1)  # the header can lie: the inflated bytes are capped too
            if len(data) > MAX_PACKED_BYTES:
                raise ModelCheckError(f"{name}: packed file {file_name!r} inflates past {MAX_PACKED_BYTES} bytes "
                                      "(its header says less); expected the plain files TFLite metadata packs")
            return data
    except KeyError:
        raise ModelCheckError(f"{name} packs no file {file_name!r}; its zip holds {sorted(archive.namelist())}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError) as err:
        # BadZipFile covers a CRC mismatch: the packed file was damaged after packing.
        raise ModelCheckError(f"{name}: packed file {file_name!r} cannot be read: {err}") from err


def embedded_record(model_bytes: bytes, name: str = "model", meta: Optional[ModelMetadata] = None) -> Optional[dict]:
    """The edgeflow record packed in the model (see the module docstring); None when the model carries none.
    A record that is there but unreadable, of another schema, or without a pixel contract raises ModelCheckError.
    `meta`: the model's metadata when the caller has read it already (it is not parsed again)."""
    data = bytes(model_bytes)
    meta = read_metadata(data, name) if meta is None else meta
    if not any(f.name == EDGEFLOW_RECORD for f in meta.associated_files):
        return None
    where = f"{EDGEFLOW_RECORD} packed in {name}"
    record = loads_json(associated_file(data, EDGEFLOW_RECORD, name), where, ModelCheckError,
                        "the record `pipeline export` writes")
    check_version(record, name, f"{EDGEFLOW_RECORD} packed in", EDGEFLOW_RECORD_SCHEMA, ModelCheckError,
                  "the record `pipeline export` writes")
    labels = record.get("labels")
    if not isinstance(record.get("preprocessing"), dict) or not (
            isinstance(labels, list) and labels and all(isinstance(x, str) for x in labels)):
        raise ModelCheckError(f"{where} holds preprocessing {record.get('preprocessing')!r} and labels {labels!r}; "
                              "expected a pixel contract object and a list of class names")
    return record


def _model_facts(data: bytes, name: str) -> _ModelFacts:
    """The metadata buffer and the input/output facts, read with the `tflite` package as edge.model.tflite_file does."""
    from edge.model.tflite_file import flatbuffer_schema

    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise ModelCheckError(f"{name} is not a TFLite model: expected {FILE_IDENTIFIER!r} at bytes 4..8, got {data[4:8]!r}")
    try:
        model = flatbuffer_schema().Model.GetRootAsModel(data, 0)
        blob = None
        for i in range(model.MetadataLength()):
            entry = model.Metadata(i)
            if entry.Name() == METADATA_NAME:  # the first one, as tflite-support's extractor takes
                blob = _buffer_bytes(data, model, entry.Buffer(), name)
                break
        graph = model.Subgraphs(0) if model.SubgraphsLength() else None
        inputs = [int(x) for x in graph.InputsAsNumpy()] if graph is not None and graph.InputsLength() else []
        num_outputs = graph.OutputsLength() if graph is not None else 0
        channels = tuple(_last_dim(graph.Tensors(i)) for i in inputs) if graph is not None else ()
    except ModelCheckError:
        raise
    except Exception as err:  # noqa: BLE001 - damaged tables fail in struct, index or decode errors alike
        raise ModelCheckError(f"{name} is damaged: cannot read its metadata list ({type(err).__name__}: {err})") from err
    return _ModelFacts(blob, len(inputs), num_outputs, channels)


def _buffer_bytes(data: bytes, model, index: int, name: str) -> bytes:
    if not 0 <= index < model.BuffersLength():
        raise ModelCheckError(f"{name}: metadata {METADATA_NAME.decode()} names buffer {index}, the model has {model.BuffersLength()}")
    buffer = model.Buffers(index)
    if buffer.Offset() > 1:  # data stored after the flatbuffer (models over 2 GB)
        start, size = buffer.Offset(), buffer.Size()
        if start + size > len(data):
            raise ModelCheckError(f"{name}: metadata {METADATA_NAME.decode()} spans bytes {start}..{start + size}, outside the file ({len(data)} bytes)")
        return data[start:start + size]
    size = buffer.DataLength()
    if not size:
        raise ModelCheckError(f"{name}: metadata {METADATA_NAME.decode()} is an empty buffer, expected a ModelMetadata flatbuffer")
    blob = buffer.DataAsNumpy().tobytes()
    if len(blob) != size:  # numpy slicing stops quietly at the end of the file
        raise ModelCheckError(f"{name}: metadata {METADATA_NAME.decode()} claims {size} bytes, the file holds {len(blob)} of them")
    return blob


def _last_dim(tensor) -> Optional[int]:
    return int(tensor.ShapeAsNumpy()[-1]) if tensor.ShapeLength() else None


def _parse(blob: bytes, where: str) -> ModelMetadata:
    r = _MetadataReader(blob, where)
    root = r.root(METADATA_IDENTIFIER, "ModelMetadata", " (metadata_schema.fbs ModelMetadata)")
    files = list(_files(root, _MODEL_FILES, "ModelMetadata.associated_files"))
    inputs: Tuple[TensorMetadata, ...] = ()
    outputs: Tuple[TensorMetadata, ...] = ()
    subgraphs = root.tables(_MODEL_SUBGRAPHS, "subgraph_metadata")
    if subgraphs:  # TFLite runs subgraph 0; the schema says its metadata comes first
        sub = subgraphs[0]
        inputs = tuple(_tensor(t, f"input_tensor_metadata[{i}]") for i, t in enumerate(sub.tables(_SUBGRAPH_INPUTS, "input_tensor_metadata")))
        outputs = tuple(_tensor(t, f"output_tensor_metadata[{i}]") for i, t in enumerate(sub.tables(_SUBGRAPH_OUTPUTS, "output_tensor_metadata")))
        files.extend(_files(sub, _SUBGRAPH_FILES, "subgraph_metadata[0].associated_files"))
    return ModelMetadata(
        present=True,
        name=root.string(_MODEL_NAME, "ModelMetadata.name"),
        description=root.string(_MODEL_DESCRIPTION, "ModelMetadata.description"),
        version=root.string(_MODEL_VERSION, "ModelMetadata.version"),
        inputs=inputs,
        outputs=outputs,
        associated_files=tuple(files),
        min_parser_version=root.string(_MODEL_MIN_PARSER_VERSION, "ModelMetadata.min_parser_version"),
    )


def _files(table: _Table, field: int, what: str) -> Tuple[AssociatedFile, ...]:
    out = []
    for i, f in enumerate(table.tables(field, what)):
        at = f"{what}[{i}]"
        file_name = f.string(_FILE_NAME, f"{at}.name")
        if not file_name:
            table.r.fail(f"{at} has no name, expected the name of a file in the appended zip")
        code = f.scalar(_FILE_TYPE, "<b")
        # An unknown type is a newer schema's, not damage: keep it by number so nothing mistakes it for labels.
        out.append(AssociatedFile(file_name, _FILE_TYPES.get(code, f"TYPE_{code}"),
                                  f.string(_FILE_DESCRIPTION, f"{at}.description"), f.string(_FILE_LOCALE, f"{at}.locale")))
    return tuple(out)


def _tensor(t: _Table, at: str) -> TensorMetadata:
    mean = std = None
    for j, unit in enumerate(t.tables(_TENSOR_PROCESS_UNITS, f"{at}.process_units")):
        if unit.scalar(0, "<B") != _NORMALIZATION_OPTIONS:
            continue  # score calibration, thresholds, tokenizers: not the device classifier's business
        if mean is not None:
            t.r.fail(f"{at} has a second NormalizationOptions (process_units[{j}]), expected at most one")
        options = unit.table(1, f"{at}.process_units[{j}].options")
        if options is None:
            t.r.fail(f"{at}.process_units[{j}] is NormalizationOptions without its table")
        mean, std = _normalization(t.r, options, f"{at}.process_units[{j}]")
    return TensorMetadata(t.string(_TENSOR_NAME, f"{at}.name"), mean, std, _color_space(t, at),
                          _files(t, _TENSOR_FILES, f"{at}.associated_files"))


def _normalization(r: _Reader, options: _Table, at: str) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    mean = tuple(options.vector(0, "<f", f"{at}.mean"))
    std = tuple(options.vector(1, "<f", f"{at}.std"))
    if not mean or not std:
        r.fail(f"{at} has mean {list(mean)} and std {list(std)}, expected at least one value in each")
    if not all(math.isfinite(v) for v in mean + std) or any(s == 0 for s in std):
        r.fail(f"{at} has mean {list(mean)} and std {list(std)}, expected finite numbers and a non-zero std")
    if len(mean) != len(std) and 1 not in (len(mean), len(std)):
        r.fail(f"{at} has {len(mean)} means and {len(std)} stds, expected as many of each (or one, for all channels)")
    return mean, std


def _color_space(t: _Table, at: str) -> Optional[str]:
    content = t.table(_TENSOR_CONTENT, f"{at}.content")
    if content is None or content.scalar(0, "<B") != _IMAGE_PROPERTIES:
        return None
    image = content.table(1, f"{at}.content.image_properties")
    if image is None:
        return None
    code = image.scalar(0, "<b")
    return _COLOR_SPACES.get(code, f"COLOR_SPACE_{code}")


def _check_against_model(meta: ModelMetadata, facts: _ModelFacts, name: str) -> None:
    """The schema says the tensor metadata matches SubGraph.inputs/outputs one for one; mean/std fit the channels."""
    for kind, described, actual in (("inputs", len(meta.inputs), facts.num_inputs), ("outputs", len(meta.outputs), facts.num_outputs)):
        if described and described != actual:
            raise ModelCheckError(f"{name}: TFLite metadata describes {described} {kind}, the model has {actual}")
    for i, tensor in enumerate(meta.inputs):
        channels = facts.input_channels[i]
        for label, values in (("mean", tensor.mean), ("std", tensor.std)):
            if values is not None and len(values) > 1 and len(values) != channels:
                raise ModelCheckError(f"{name}: TFLite metadata gives input {i} {len(values)} {label} values "
                                      f"for {channels} channels, expected 1 or {channels}")


def _open_zip(data: bytes, name: str, wanted: str) -> zipfile.ZipFile:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as err:
        raise ModelCheckError(f"{name} has no readable zip of associated files ({err}), expected one holding {wanted!r}") from err
    if len(archive.infolist()) > MAX_PACKED_FILES:
        archive.close()
        raise ModelCheckError(f"{name}'s zip of associated files holds {len(archive.infolist())} members, more than the "
                              f"{MAX_PACKED_FILES} this edgeflow opens (docs/trust.md)")
    return archive


def _check_files_packed(data: bytes, meta: ModelMetadata, name: str) -> None:
    """Every file the metadata names is in the appended zip (reading them is left to associated_file)."""
    wanted = sorted({f.name for f in meta.all_files()})
    if not wanted:
        return
    with _open_zip(data, name, wanted=", ".join(wanted)) as archive:
        packed = set(archive.namelist())
    missing = [w for w in wanted if w not in packed]
    if missing:
        raise ModelCheckError(f"{name}: TFLite metadata names {missing}, not in the appended zip (it holds {sorted(packed)})")
