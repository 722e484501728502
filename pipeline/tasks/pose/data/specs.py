"""Pose data specs, resolved to a checked `PoseSource`:

    figures | figures?count=600&size=128&seed=0   the built-in stick figures, drawn on the fly
    PATH/annotations.json                         COCO keypoints (file names relative to the JSON's folder, or --images)
    PATH/data.yaml                                YOLO-pose, Ultralytics' layout (kpt_shape, flip_idx)
    'PATH/*.tfrecord' | gs://...                  TFRecords as `pipeline prepare --task pose` writes them
"""
from __future__ import annotations

from typing import Optional, Sequence

from pipeline.errors import DataError
from pipeline.tasks.detect.data.specs import SpecKinds, builtin_options, open_kind
from pipeline.tasks.pose.data.examples import PoseSource

FIGURES = "figures"
FIGURES_DEFAULTS = {"count": 600, "size": 128, "seed": 0}


def open_pose(spec: str, labels: Optional[Sequence[str]] = None, images: Sequence[str] = (), layout=None) -> PoseSource:
    """The examples of `spec`, every image, box and keypoint checked. `labels` and `layout` (the training data's) must
    be the held-out data's too."""
    source = open_kind(spec, KINDS, labels, images)
    if labels is not None and list(source.labels) != list(labels):
        raise DataError(f"{spec}: classes {source.labels}; expected the training data's classes {list(labels)} in that order")
    if layout is not None and (source.layout.names, source.layout.flip_idx) != (layout.names, layout.flip_idx):
        raise DataError(f"{spec}: keypoints {list(source.layout.names)}; expected the training data's "
                        f"{list(layout.names)} with the same flip_idx")
    return source


def _figures(spec: str) -> PoseSource:
    from pipeline.tasks.pose.data.figures import figures

    values = builtin_options(spec, FIGURES_DEFAULTS, min_size=32)
    return figures(values["count"], size=values["size"], seed=values["seed"])


KINDS = SpecKinds(FIGURES, _figures, "pipeline.tasks.pose.data.coco.read_coco_keypoints",
                  "pipeline.tasks.pose.data.yolo.read_yolo_pose", "pipeline.tasks.pose.data.tfrecords.read_pose_tfrecords",
                  folder="pose data {spec!r} is a folder; expected its annotations.json (COCO keypoints), data.yaml "
                         "(YOLO-pose) or a glob of TFRecord files",
                  unknown="pose data spec {spec!r} is neither 'figures', a COCO keypoints annotations.json, a YOLO-pose "
                          "data.yaml nor a glob of TFRecord files")
