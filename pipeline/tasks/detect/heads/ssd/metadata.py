"""TFLite metadata for an object detector ending in the post-processing op: what MediaPipe's ObjectDetector and the
TFLite Task Library read to run it and name its classes.

    model = embed(model_bytes, ["circle", "square"], 128, mean=128.0, std=128.0, input_dtype="uint8", name="ssd int8")

The input is an RGB image with its normalization; the four outputs, in the subgraph's order, are named as
Google's detectors name them: "location" (boxes as ymin, xmin, ymax, xmax ratios: BOUNDARIES with index
1, 0, 3, 2), "category" (class ids, with the label file as TENSOR_VALUE_LABELS: value k is line k),
"score", and "number of detections". A `record` (pipeline.metadata's edgeflow record) is packed as the model's
own file, so `edge` tools know the pixel contract with no sidecar.
"""
from __future__ import annotations

import json
from typing import List, Optional, Sequence

from edge.errors import EdgeError
from edge.model.metadata import EDGEFLOW_RECORD, associated_file, read_metadata
from pipeline.errors import PipelineError
from pipeline.metadata import flatbuffer, model_file
from pipeline.metadata.description import (AssociatedFile, BoundingBoxContent, BoxType, ColorSpace, CoordinateType,
                                           FeatureContent, FileType, ImageContent, ModelDescription, Normalization,
                                           Stats, Tensor)

LABELS_FILE = "labels.txt"
OUTPUT_NAMES = ("location", "category", "score", "number of detections")  # the names MediaPipe looks for


def describe(labels: Sequence[str], image_size: int, mean: float, std: float, input_dtype: str, name: str,
             record: Optional[dict] = None) -> ModelDescription:
    """The metadata of a detector with one RGB input and the post-processing op's four outputs."""
    labels = [str(x) for x in labels]
    label_file = AssociatedFile(LABELS_FILE, ("\n".join(labels) + "\n").encode("utf-8"), FileType.TENSOR_VALUE_LABELS,
                                "class names, one per line: line k names class id k")
    image = image_input(image_size, mean, std, input_dtype)
    per_object = (2, 2)  # [1, N, ...]: one object per position of dimension 1
    outputs = (
        Tensor(OUTPUT_NAMES[0], "the box of each detected object: ymin, xmin, ymax, xmax as shares of the input",
               content=BoundingBoxContent(BoxType.BOUNDARIES, CoordinateType.RATIO, index=(1, 0, 3, 2), range=per_object),
               stats=Stats(max=(1.0,), min=(0.0,))),
        Tensor(OUTPUT_NAMES[1], "the class id of each detected object (0-based, the label file's line)",
               content=FeatureContent(range=per_object), files=(label_file,)),
        Tensor(OUTPUT_NAMES[2], "the score of each detected object, highest first",
               content=FeatureContent(range=per_object), stats=Stats(max=(1.0,), min=(0.0,))),
        Tensor(OUTPUT_NAMES[3], "how many of the positions hold a detected object", content=FeatureContent()),
    )
    return ModelDescription(
        name=name,
        description=(f"object detector for {len(labels)} classes ({', '.join(labels[:10])}{', ...' if len(labels) > 10 else ''}), "
                     f"made by edgeflow: RGB {image_size}x{image_size} input, boxes, class ids, scores and count from "
                     "TFLite_Detection_PostProcess"),
        author="edgeflow", inputs=(image,), outputs=outputs, files=record_files(record))


def image_input(image_size: int, mean: float, std: float, input_dtype: str) -> Tensor:
    """A detector's RGB input with its normalization (shared by both heads' metadata)."""
    stats = Stats(max=(255.0,), min=(0.0,)) if input_dtype == "uint8" else Stats(
        max=((255.0 - mean) / std,), min=((0.0 - mean) / std,))
    return Tensor(name="image", description=f"RGB image, {image_size}x{image_size}, (pixel - {mean:g}) / {std:g}",
                  content=ImageContent(ColorSpace.RGB), process_units=(Normalization((mean,), (std,)),), stats=stats)


def record_files(record: Optional[dict]) -> tuple:
    """The edgeflow record as the model's own packed file (none without a record)."""
    if record is None:
        return ()
    return (AssociatedFile(EDGEFLOW_RECORD, json.dumps(record, indent=1, sort_keys=True).encode("utf-8"),
                           FileType.DESCRIPTIONS, "edgeflow: the pixel contract this model is fed by and the run it came from"),)


def embed(model_bytes: bytes, labels: Sequence[str], image_size: int, *, mean: float, std: float, input_dtype: str,
          name: str, record: Optional[dict] = None) -> bytes:
    """`model_bytes` with the detector's metadata, read back with edge's reader and checked."""
    written, meta = attached(model_bytes, describe(labels, image_size, mean, std, input_dtype, name, record), name)
    try:
        packed = packed_labels(written, name)
    except EdgeError as err:
        raise PipelineError(f"the metadata written into {name} does not read back: {err}") from err
    names = tuple(t.name for t in meta.outputs)
    if packed != [str(x) for x in labels] or names != OUTPUT_NAMES or meta.mean != (float(mean),):
        raise PipelineError(f"the metadata written into {name} reads back differently (labels {packed}, outputs "
                            f"{names}, mean {meta.mean}); expected what was asked for")
    return written


def attached(model_bytes: bytes, described, name: str):
    """(`model_bytes` with `described` and its files attached, the metadata read back from them by edge's reader)."""
    try:
        written = model_file.attach(model_bytes, flatbuffer.encode(described),
                                    [(f.name, f.content) for f in described.all_files()])
    except ValueError as err:
        raise PipelineError(f"cannot write the TFLite metadata of {name}: {err}") from err
    try:
        return written, read_metadata(written, name)
    except EdgeError as err:
        raise PipelineError(f"the metadata written into {name} does not read back: {err}") from err


def packed_labels(model_bytes: bytes, name: str = "model") -> Optional[List[str]]:
    """The class names packed on the "category" output (TENSOR_VALUE_LABELS), or None."""
    from edge.model.labels import parse_labels

    meta = read_metadata(model_bytes, name)
    for tensor in meta.outputs:
        for f in tensor.associated_files:
            if f.type == "TENSOR_VALUE_LABELS":
                return parse_labels(associated_file(model_bytes, f.name, name), f"{f.name} packed in {name}")
    return None
