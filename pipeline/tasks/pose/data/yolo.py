"""Pose data in Ultralytics' YOLO-pose layout: detection's data.yaml (pipeline/tasks/detect/data/yolo.py) with
`kpt_shape: [K, 2 or 3]` and, for a layout with left and right, `flip_idx`; label lines

    class cx cy w h  x1 y1 [v1]  ...  xK yK [vK]

normalized to the image. With 2 numbers per keypoint every keypoint is labelled and visible (visibility 2), as
Ultralytics reads them. Optional `kpt_names` (a list, or Ultralytics' {class: [names]} with one list) and `sigmas`
(one per keypoint); without names the keypoints are named by number, except 17 of them with COCO's flip_idx, which are
COCO's person keypoints (Ultralytics' coco-pose layout, scored with COCO's sigmas); without flip_idx each mirrors to the keypoint
whose name swaps left and right, else to itself (so a layout with unnamed left and right keypoints needs flip_idx).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import List

import yaml

from pipeline.errors import DataError
from pipeline.tasks.detect.data.yolo import MAX_DATA_YAML_BYTES, _class_names, _text, read_labelled
from pipeline.tasks.pose.data.examples import COCO_PERSON, PoseSource, flip_by_name, layout, pose_example


def read_yolo_pose(path) -> PoseSource:
    path = Path(path)
    labels = _class_names(path)  # the class names, the YAML checked (no aliases) before it is read again here
    doc = yaml.safe_load(_text(path, MAX_DATA_YAML_BYTES, "a YOLO data.yaml"))
    k, dims = _kpt_shape(doc.get("kpt_shape"), path)
    names = _names(doc.get("kpt_names"), k, path)
    if doc.get("kpt_names") is None and k == len(COCO_PERSON) and doc.get("flip_idx") == list(flip_by_name(COCO_PERSON)):
        names = list(COCO_PERSON)  # COCO's person keypoints (and so COCO's sigmas), as Ultralytics takes 17 such points
    shape = layout(names, (), doc.get("flip_idx"), doc.get("sigmas"), f"{path}")
    examples = read_labelled(path, len(labels), functools.partial(_keypoint_line, k, dims),
                             lambda det, points, where: pose_example(det, points, k, where))
    return PoseSource(str(path), "yolo", labels, examples, shape)


def _keypoint_line(k: int, dims: int, where: str, fields: List[str], line: str):
    """(class, (cx, cy, w, h), its K keypoints (x, y, visibility)) of one label line."""
    if len(fields) != 5 + k * dims:
        raise DataError(f"{where}: {len(fields)} fields; expected {5 + k * dims}: class cx cy w h and {k} "
                        f"keypoints of {dims} numbers (kpt_shape [{k}, {dims}])")
    try:
        cls = int(fields[0])
        values = [float(v) for v in fields[1:]]
    except ValueError as err:
        raise DataError(f"{where}: {line.strip()[:60]!r} is not numbers; expected an integer class and "
                        f"{4 + k * dims} numbers") from err
    rest = values[4:]
    return cls, values[:4], [(rest[i * dims], rest[i * dims + 1], rest[i * dims + 2] if dims == 3 else 2) for i in range(k)]


def _kpt_shape(value, path: Path):
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            and value[0] >= 1 and value[1] in (2, 3)):
        raise DataError(f"{path}: kpt_shape {value!r}; expected [K, 2] or [K, 3] (K keypoints of x, y and perhaps "
                        "visibility), as Ultralytics' pose data.yaml gives it")
    return value[0], value[1]


def _names(value, k: int, path: Path):
    if value is None:
        return [f"keypoint_{i}" for i in range(k)]
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    if not (isinstance(value, list) and len(value) == k and all(isinstance(n, str) for n in value)):
        raise DataError(f"{path}: kpt_names {str(value)[:60]}; expected {k} names (kpt_shape's count)")
    return value
