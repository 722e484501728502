"""TFLite metadata in every model the pipeline writes, so the file stands alone.

    from pipeline import metadata
    written = metadata.embed(model_bytes, run, "model_int8.tflite", contract, export_facts)
    written.model        # the model with its metadata; written.facts for the manifest

What a model carries (tflite-support's metadata schema, read by MediaPipe, the TFLite Task Library
and `edge`): name, description, version; its input as an RGB image with the NormalizationOptions it
truly expects (the pixel contract's mean and std); `labels.txt` as the output's label file; and
`edgeflow_model.json` (the sidecar's facts without the sha256: labels, image size, input quantization,
the pixel contract, and the run's provenance: data identity digests and counts, training, export,
versions; not the held-out list) as the model's own associated file.

The writer is ours: `description` says what the metadata holds, `flatbuffer` encodes it with the
`flatbuffers` package, `model_file` puts it and the packed files into the model. No second environment
and no system library: tflite-support's writer pins protobuf < 4 (TensorFlow 2.21 needs newer), has
no wheels for Python 3.12 or newer, and its native module needs libusb-1.0.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional

from edge.pixels.contract import PixelContract
from edge.errors import EdgeError
from edge.model.labels import labels_from_model
from edge.model.metadata import EDGEFLOW_RECORD, embedded_record, read_metadata
from pipeline.errors import PipelineError
from pipeline.metadata import flatbuffer, model_file
from pipeline.metadata.description import (AssociatedFile, ColorSpace, FeatureContent, FileType, ImageContent,
                                           ModelDescription, Normalization, Stats, Tensor)

if TYPE_CHECKING:
    from pipeline.rundir.run import Run

LABELS_FILE = "labels.txt"
WRITER = "edgeflow pipeline.metadata (flatbuffers)"
RECORD_SCHEMA = 1
_PIXEL_RANGE = (0.0, 255.0)  # what the pixel contract feeds before normalizing


class Written(NamedTuple):
    model: bytes  # the model with its metadata
    facts: Dict[str, Any]  # for the manifest: what was packed, by which writer
    notes: List[str]  # what the user should know (nothing, today: every model gets its metadata)


def record(run: "Run", model_name: str, contract: PixelContract, export_facts: Dict[str, Any]) -> dict:
    """edgeflow_model.json: what the model needs to be fed and where it came from (no sha256, no held-out list)."""
    data: Dict[str, Any] = {"train_spec": run.data.train.get("spec"), "classes": run.data.classes}
    for split in ("train", "heldout"):
        summary = run.data.summary(split)  # counts and digests only: the examples list stays in the run
        if summary:
            data[split] = summary
    return {
        "schema_version": RECORD_SCHEMA,
        "model": model_name,
        "labels": run.labels,
        "image_size": run.image_size,
        "input": export_facts.get("input"),
        "preprocessing": contract.as_record(),
        "provenance": {
            "run": run.dir.resolve().name,
            "trained": run.trained_at,
            "model": run.model.record,
            "data": data,
            "training": run.training.provenance(),
            "export": {k: v for k, v in export_facts.items() if k not in ("input", "output", "preprocessing")},
            "versions": run.versions,
        },
    }


def describe(run: "Run", model_name: str, contract: PixelContract, export_facts: Dict[str, Any]) -> ModelDescription:
    """What an exported classifier's metadata says: an RGB image in, one score per class out, the labels, the record."""
    labels, name = run.labels, run.model.name
    rec = record(run, model_name, contract, export_facts)
    identity = rec["provenance"]["data"].get("train") or {}
    mode = export_facts.get("mode", "float32")
    mean, std = list(contract.norm.mean), list(contract.norm.std)
    size = run.image_size
    image = Tensor(
        name="image",
        description=f"RGB image, {size}x{size}, (pixel - {_channel_values(mean)}) / {_channel_values(std)}",
        content=ImageContent(ColorSpace.RGB),
        process_units=(Normalization(tuple(mean), tuple(std)),),
        stats=_input_stats((export_facts.get("input") or {}).get("dtype"), mean, std))
    scores = Tensor(
        name="scores",
        description=f"probability of each of the {len(labels)} classes",
        content=FeatureContent(),
        files=(AssociatedFile(LABELS_FILE, ("\n".join(labels) + "\n").encode("utf-8"), FileType.TENSOR_AXIS_LABELS,
                              "class names, one per line, in the order of the scores"),))
    own = AssociatedFile(EDGEFLOW_RECORD, json.dumps(rec, indent=1, sort_keys=True).encode("utf-8"), FileType.DESCRIPTIONS,
                         "edgeflow: the pixel contract this model is fed by (decode, resize, mean, std) and the run it came from")
    return ModelDescription(
        name=f"{name} {mode} ({run.dir.resolve().name})",
        description=(f"{name} image classifier for {len(labels)} classes ({', '.join(labels[:10])}"
                     f"{', ...' if len(labels) > 10 else ''}), {mode}, made by edgeflow: RGB {size}x{size} input "
                     "normalized (pixel - mean) / std; scores in the label file's order"),
        version=f"trained {rec['provenance']['trained']}; training data sha256 {str(identity.get('sha256'))[:16]}",
        author="edgeflow",
        inputs=(image,), outputs=(scores,), files=(own,))


def _input_stats(dtype: Optional[str], mean: List[float], std: List[float]) -> Optional[Stats]:
    """The range of values the input takes: a uint8 input the raw bytes, a float one the normalized pixels."""
    if dtype == "uint8":
        return Stats(max=(255.0,), min=(0.0,))
    if dtype == "float32":
        return Stats(max=tuple((_PIXEL_RANGE[1] - m) / s for m, s in _pairs(mean, std)),
                     min=tuple((_PIXEL_RANGE[0] - m) / s for m, s in _pairs(mean, std)))
    return None  # int8: its bytes are the normalized pixels quantized, read the input's quantization


def _pairs(mean: List[float], std: List[float]):
    n = max(len(mean), len(std))
    return [(mean[i if len(mean) > 1 else 0], std[i if len(std) > 1 else 0]) for i in range(n)]


def _channel_values(values) -> str:
    """Per-channel values as one number when the channels agree ("128"), else as a list ("[0.5, 0.4, 0.3]")."""
    return f"{values[0]:g}" if len(set(values)) == 1 else "[" + ", ".join(f"{v:g}" for v in values) + "]"


def write(model_bytes: bytes, described: ModelDescription) -> bytes:
    """`model_bytes` carrying `described` and the files it names; ValueError naming what cannot be written."""
    return model_file.attach(model_bytes, flatbuffer.encode(described),
                             [(f.name, f.content) for f in described.all_files()])


def embed(model_bytes: bytes, run: "Run", model_name: str, contract: PixelContract, export_facts: Dict[str, Any]) -> Written:
    """The model with its metadata, read back with edge's reader and checked against what was asked for."""
    described = describe(run, model_name, contract, export_facts)
    try:
        written = write(model_bytes, described)
    except ValueError as err:
        raise PipelineError(f"cannot write the TFLite metadata of {model_name}: {err}") from err
    _check(written, model_name, described, run.labels)
    facts = {"writer": WRITER, "min_parser_version": flatbuffer.min_parser_version(described),
             "files": [f.name for f in (described.outputs[0].files + described.files)]}
    return Written(written, facts, [])


def copy(source: bytes, target: bytes, name: str) -> bytes:
    """`target` with `source`'s metadata and packed files (a compiled model whose compiler dropped them)."""
    try:
        blob, files = model_file.carried(source)
        if blob is None:
            raise PipelineError(f"the int8 model has no TFLite metadata to copy onto {name}")
        written = model_file.attach(target, blob, files)
    except ValueError as err:
        raise PipelineError(f"cannot copy the int8 model's TFLite metadata onto {name}: {err}") from err
    try:
        same = read_metadata(written, name) == read_metadata(source, "the int8 model")
    except EdgeError as err:
        raise PipelineError(f"the metadata copied onto {name} does not read back: {err}") from err
    if not same:
        raise PipelineError(f"copying the int8 model's metadata onto {name} did not give the same metadata back")
    return written


def _check(model: bytes, name: str, described: ModelDescription, expected_labels: List[str]) -> None:
    """What was written reads back, with edge's own reader, as what was asked for."""
    try:
        meta = read_metadata(model, name)
        labels = labels_from_model(model, name=name)
        packed = embedded_record(model, name)
    except EdgeError as err:
        raise PipelineError(f"the metadata written into {name} does not read back: {err}") from err
    norm = described.inputs[0].process_units[0]
    asked = json.loads(described.files[0].content)
    if (labels != expected_labels or packed != asked or meta.mean != _float32(norm.mean) or meta.std != _float32(norm.std)
            or meta.inputs[0].color_space != "RGB"):
        raise PipelineError(f"the metadata written into {name} reads back differently (labels {labels}, mean {meta.mean}, "
                            f"std {meta.std}); expected what was asked for")


def _float32(values) -> tuple:
    """The values as the flatbuffer stores them (32-bit floats)."""
    return tuple(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def restore(source: Path, compiled: Path) -> bool:
    """Put `source`'s metadata back into `compiled` when the compiler dropped it; True when it did.
    Compiler 16 keeps it (Google's compiled twin of mobilenet_v1_0.25_128_quant keeps its metadata and labels)."""
    data, out = Path(source).read_bytes(), Path(compiled).read_bytes()
    try:
        if not read_metadata(data, Path(source).name).present or read_metadata(out, Path(compiled).name).present:
            return False
    except EdgeError:
        return False  # not a readable model: the compile stage's own checks refuse it, naming what is wrong
    Path(compiled).write_bytes(copy(data, out, Path(compiled).name))
    return True
