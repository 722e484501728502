"""Pose TFRecords: detection's records (pipeline/tasks/detect/data/tfrecords.py, the TF Object Detection API's schema:
image, boxes, 1-based classes, labels.txt beside the shards) with each object's keypoints as the API's keypoint
features, K per object in object order:

    image/object/keypoint/x, image/object/keypoint/y    float, normalized to the image (0 where not labelled)
    image/object/keypoint/visibility                    int64, COCO's 0/1/2

and the keypoint layout (names, skeleton, flip_idx, sigmas and their source) in keypoints.json beside the shards.
"""
from __future__ import annotations

import json
import os
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.errors import DataError
from pipeline.tasks.detect.data.tfrecords import encode_example, read_tfrecords, write_tfrecords
from pipeline.tasks.pose.data.examples import KeypointLayout, PoseSource, layout as checked_layout, pose_example

LAYOUT_NAME = "keypoints.json"
_KEYS = ("x", "y", "visibility")


def write_pose_tfrecords(source: PoseSource, folder: str, shards: int = 1) -> List[str]:
    """Write `source` as `shards` files `pose-XXXXX-of-YYYYY.tfrecord`, with labels.txt and keypoints.json, in `folder`."""
    paths = write_tfrecords(source, folder, shards, "pose", _encode_pose)
    with tf.io.gfile.GFile(os.path.join(folder, LAYOUT_NAME), "w") as f:
        f.write(json.dumps(source.layout.as_dict(), indent=1))
    return paths


def _encode_pose(e, labels: Sequence[str]) -> bytes:
    """Detection's record of `e` with its keypoints."""
    record = tf.train.Example.FromString(encode_example(e, labels))
    feature = record.features.feature
    feature["image/object/keypoint/x"].float_list.value.extend(e.keypoints[..., 0].reshape(-1).tolist())
    feature["image/object/keypoint/y"].float_list.value.extend(e.keypoints[..., 1].reshape(-1).tolist())
    feature["image/object/keypoint/visibility"].int64_list.value.extend(e.keypoints[..., 2].astype(int).reshape(-1).tolist())
    return record.SerializeToString()


def read_pose_tfrecords(pattern: str, labels: Optional[Sequence[str]] = None) -> PoseSource:
    boxes = read_tfrecords(pattern, labels)  # images, boxes and classes checked, in file and record order
    files = sorted(tf.io.gfile.glob(pattern))
    shape = _layout_beside(files[0])
    k = shape.count
    examples = iter(boxes.examples)
    found = []
    for path in files:
        for n, raw in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
            det = next(examples)
            feature = tf.train.Example.FromString(raw).features.feature
            lists = [list(feature[f"image/object/keypoint/{key}"].float_list.value if key != "visibility" else
                          feature[f"image/object/keypoint/{key}"].int64_list.value) if f"image/object/keypoint/{key}" in feature
                     else [] for key in _KEYS]
            where = f"{path}, record {n} ({det.id})"
            wanted = k * len(det.boxes)
            if any(len(values) != wanted for values in lists):
                raise DataError(f"{where}: image/object/keypoint/x, y and visibility hold {', '.join(str(len(v)) for v in lists)} "
                                f"values; expected {wanted}: {k} keypoints (keypoints.json) for each of its {len(det.boxes)} objects")
            points = np.stack([np.asarray(v, np.float64) for v in lists], axis=-1).reshape(len(det.boxes), k, 3)
            found.append(pose_example(det, points, k, [f"{where}, object {i}" for i in range(len(det.boxes))]))
    return PoseSource(pattern, "tfrecord", boxes.labels, found, shape)


def _layout_beside(first: str) -> KeypointLayout:
    path = os.path.join(os.path.dirname(first), LAYOUT_NAME)
    if not tf.io.gfile.exists(path):
        raise DataError(f"{path}: not found; expected the keypoint layout (names, skeleton, flip_idx, sigmas) beside the "
                        "TFRecord shards, as `pipeline prepare --task pose` writes it")
    with tf.io.gfile.GFile(path) as f:
        try:
            d = json.loads(f.read())
            shape = checked_layout(d["names"], d.get("skeleton", ()), d.get("flip_idx"), d.get("sigmas"), path)
        except (ValueError, KeyError, TypeError) as err:
            raise DataError(f"{path}: not a keypoint layout ({err}); expected JSON with names, skeleton, flip_idx and "
                            "sigmas") from err
    # The sigmas' source as recorded: the data's own, COCO's or the stated default, not "data" for having been written.
    return shape._replace(sigmas_source=d.get("sigmas_source", shape.sigmas_source))
