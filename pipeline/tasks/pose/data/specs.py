"""Pose data specs, resolved to a checked `PoseSource`:

    figures | figures?count=600&size=128&seed=0   the built-in stick figures, drawn on the fly
    PATH/annotations.json                         COCO keypoints (file names relative to the JSON's folder, or --images)
    PATH/data.yaml                                YOLO-pose, Ultralytics' layout (kpt_shape, flip_idx)
    'PATH/*.tfrecord' | gs://...                  TFRecords as `pipeline prepare --task pose` writes them
"""
from __future__ import annotations

import os
from typing import Optional, Sequence
from urllib.parse import parse_qsl

from pipeline.errors import DataError
from pipeline.tasks.detect.data.specs import is_coco
from pipeline.tasks.pose.data.examples import PoseSource

FIGURES = "figures"
FIGURES_DEFAULTS = {"count": 600, "size": 128, "seed": 0}


def open_pose(spec: str, labels: Optional[Sequence[str]] = None, images: Sequence[str] = (), layout=None) -> PoseSource:
    """The examples of `spec`, every image, box and keypoint checked. `labels` and `layout` (the training data's) must
    be the held-out data's too."""
    source = _open(spec, images, labels)
    if labels is not None and list(source.labels) != list(labels):
        raise DataError(f"{spec}: classes {source.labels}; expected the training data's classes {list(labels)} in that order")
    if layout is not None and (source.layout.names, source.layout.flip_idx) != (layout.names, layout.flip_idx):
        raise DataError(f"{spec}: keypoints {list(source.layout.names)}; expected the training data's "
                        f"{list(layout.names)} with the same flip_idx")
    return source


def _open(spec: str, images: Sequence[str], labels: Optional[Sequence[str]]) -> PoseSource:
    if spec == FIGURES or spec.startswith(FIGURES + "?"):
        return _figures(spec)
    if is_coco(spec):
        from pipeline.tasks.pose.data.coco import read_coco_keypoints

        return read_coco_keypoints(spec, images)
    if spec.lower().endswith((".yaml", ".yml")):
        from pipeline.tasks.pose.data.yolo import read_yolo_pose

        return read_yolo_pose(spec)
    if any(ch in spec for ch in "*?[") or spec.lower().endswith((".tfrecord", ".tfrec")) or spec.startswith("gs://"):
        from pipeline.tasks.pose.data.tfrecords import read_pose_tfrecords

        return read_pose_tfrecords(spec, labels)
    if os.path.isdir(spec):
        raise DataError(f"pose data {spec!r} is a folder; expected its annotations.json (COCO keypoints), data.yaml "
                        "(YOLO-pose) or a glob of TFRecord files")
    raise DataError(f"pose data spec {spec!r} is neither 'figures', a COCO keypoints annotations.json, a YOLO-pose "
                    "data.yaml nor a glob of TFRecord files")


def _figures(spec: str) -> PoseSource:
    from pipeline.tasks.pose.data.figures import figures

    _, _, query = spec.partition("?")
    values = dict(FIGURES_DEFAULTS)
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in values:
            raise DataError(f"data spec {spec!r}: unknown option {key!r}; expected some of {', '.join(FIGURES_DEFAULTS)}")
        try:
            values[key] = int(value)
        except ValueError as err:
            raise DataError(f"data spec {spec!r}: {key}={value!r}; expected a whole number") from err
    if values["count"] < 2 or values["size"] < 32:
        raise DataError(f"data spec {spec!r}: expected count >= 2 and size >= 32")
    return figures(values["count"], size=values["size"], seed=values["seed"])
