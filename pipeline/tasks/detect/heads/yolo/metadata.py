"""TFLite metadata for the anchor-free detector (pipeline/tasks/detect/heads/yolo/export.py): the RGB input with its normalization,
the two outputs described in the subgraph's order (box distributions, class logits with the label file as
TENSOR_AXIS_LABELS: position k of the last axis is line k), and the edgeflow record packed as the model's own file.

    model = embed(model_bytes, ["circle", "square"], 320, mean=128.0, std=128.0, input_dtype="uint8", name="yolo int8")
"""
from __future__ import annotations

from typing import Optional, Sequence

from pipeline.errors import PipelineError
from pipeline.metadata.description import AssociatedFile, FeatureContent, FileType, ModelDescription, Tensor
from pipeline.tasks.detect.heads.ssd.metadata import attached, image_input, record_files

LABELS_FILE = "labels.txt"
OUTPUT_NAMES = {"box_dist": "box distributions", "class_logits": "class logits"}


def describe(labels: Sequence[str], image_size: int, mean: float, std: float, input_dtype: str, name: str,
             roles: Sequence[str], record: Optional[dict] = None) -> ModelDescription:
    labels = [str(x) for x in labels]
    label_file = AssociatedFile(LABELS_FILE, ("\n".join(labels) + "\n").encode("utf-8"), FileType.TENSOR_AXIS_LABELS,
                                "class names, one per line: line k names the class logits' column k")
    image = image_input(image_size, mean, std, input_dtype)
    described = {
        "box_dist": Tensor(OUTPUT_NAMES["box_dist"], "per anchor point (strides 8, 16, 32, cell centres, row-major): logits of "
                           "16-bin distributions of the distances left, top, right, bottom to the box, in strides; softmax "
                           "each side, take the expected bin, times the stride", content=FeatureContent()),
        "class_logits": Tensor(OUTPUT_NAMES["class_logits"], "per anchor point: one logit per class (sigmoid for the "
                               "score), bounded to (-4, 4)", content=FeatureContent(), files=(label_file,)),
    }
    return ModelDescription(
        name=name,
        description=(f"object detector for {len(labels)} classes ({', '.join(labels[:10])}{', ...' if len(labels) > 10 else ''}), "
                     f"made by edgeflow: RGB {image_size}x{image_size} input, anchor-free (YOLOv8-family) box distributions "
                     "and class logits, decoded on the host (Frigate: model_type yolo-generic)"),
        author="edgeflow", inputs=(image,), outputs=tuple(described[r] for r in roles), files=record_files(record))


def embed(model_bytes: bytes, labels: Sequence[str], image_size: int, *, mean: float, std: float, input_dtype: str,
          name: str, roles: Sequence[str], record: Optional[dict] = None) -> bytes:
    """`model_bytes` with the detector's metadata (`roles`: the subgraph's outputs in order, "box_dist" or
    "class_logits"), read back with edge's reader and checked."""
    written, meta = attached(model_bytes, describe(labels, image_size, mean, std, input_dtype, name, roles, record), name)
    names = tuple(t.name for t in meta.outputs)
    if names != tuple(OUTPUT_NAMES[r] for r in roles) or meta.mean != (float(mean),):
        raise PipelineError(f"the metadata written into {name} reads back differently (outputs {names}, mean {meta.mean}); "
                            "expected what was asked for")
    return written
