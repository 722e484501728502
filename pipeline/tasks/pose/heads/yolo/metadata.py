"""TFLite metadata for the pose model (export.py): the YOLO detector's (pipeline/tasks/detect/heads/yolo/metadata.py: the
input, box distributions, class logits with the labels) plus the keypoints output, described with its keypoint count."""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from pipeline.errors import PipelineError
from pipeline.metadata.description import FeatureContent, Tensor
from pipeline.tasks.detect.heads.ssd.metadata import attached
from pipeline.tasks.detect.heads.yolo import metadata as detector
from pipeline.tasks.pose.heads.yolo.model import KEYPOINT_LIMIT

OUTPUT_NAMES = {**detector.OUTPUT_NAMES, "keypoints": "keypoints"}


def keypoints_tensor(num_keypoints: int) -> Tensor:
    return Tensor(OUTPUT_NAMES["keypoints"], f"per anchor point: {num_keypoints} keypoints, 3 channels each (dx, dy, v): "
                  "the keypoint is at the anchor point plus (dx, dy) strides, sigmoid(v) its score; bounded to "
                  f"(-{KEYPOINT_LIMIT:g}, {KEYPOINT_LIMIT:g})", content=FeatureContent())


def embed(model_bytes: bytes, labels: Sequence[str], image_size: int, num_keypoints: int, *, mean: float, std: float,
          input_dtype: str, name: str, roles: Sequence[str], record: Optional[dict] = None) -> bytes:
    """`model_bytes` with the pose model's metadata (`roles`: the subgraph's outputs in order), read back and checked."""
    described = detector.describe(labels, image_size, mean, std, input_dtype, name, [r for r in roles if r != "keypoints"],
                                  record)
    outputs = list(described.outputs)
    outputs.insert(list(roles).index("keypoints"), keypoints_tensor(num_keypoints))
    shown = ", ".join(str(x) for x in labels[:10]) + (", ..." if len(labels) > 10 else "")
    classes = f"{len(labels)} class{'' if len(labels) == 1 else 'es'}"
    text = (f"pose model for {classes} ({shown}), {num_keypoints} keypoints per object, made by edgeflow: RGB "
            f"{image_size}x{image_size} input, anchor-free (YOLOv8-family) box distributions, class logits and "
            "keypoints, decoded on the host")
    described = dataclasses.replace(described, outputs=tuple(outputs), description=text)
    written, meta = attached(model_bytes, described, name)
    names = tuple(t.name for t in meta.outputs)
    if names != tuple(OUTPUT_NAMES[r] for r in roles) or meta.mean != (float(mean),):
        raise PipelineError(f"the metadata written into {name} reads back differently (outputs {names}, mean {meta.mean}); "
                            "expected what was asked for")
    return written
