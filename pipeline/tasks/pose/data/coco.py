"""COCO keypoint annotations (person_keypoints_*.json, and what CVAT and Label Studio export as COCO keypoints).

Images, boxes and crowd regions are read as detection reads COCO (pipeline/tasks/detect/data/coco.py: every image and
box checked there); this adds each category's `keypoints` names and `skeleton` (COCO's 1-based pairs), each
annotation's `keypoints` ([x, y, v] * K in pixels) and `num_keypoints`. Every category must share one layout. A
category may carry `sigmas` (one per keypoint, a field COCO's own files do not have) and `flip_idx`; without them the
layout's defaults apply (pipeline/tasks/pose/data/examples.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from edge.files.bounded import loads_json, read_regular
from pipeline.errors import DataError
from pipeline.tasks.detect.data.coco import MAX_ANNOTATIONS_BYTES, read_coco
from pipeline.tasks.pose.data.examples import PoseSource, layout, pose_example


def read_coco_keypoints(path, images: Sequence[str] = ()) -> PoseSource:
    boxes = read_coco(path, images)  # images, boxes, categories and crowds checked
    path = Path(path)
    doc = loads_json(read_regular(path, MAX_ANNOTATIONS_BYTES, "annotations file", DataError), str(path), DataError,
                     "a COCO annotations.json")
    categories = sorted(doc["categories"], key=lambda c: c["id"])
    shape = _layout(categories, path)
    k = shape.count
    order = {im["id"]: n for n, im in enumerate(doc["images"])}
    objects = [[] for _ in doc["images"]]  # per image, its non-crowd annotations in file order, as read_coco keeps them
    for ann in doc["annotations"]:
        if not ann.get("iscrowd", 0):
            objects[order[ann["image_id"]]].append(ann)
    examples = []
    for det, anns in zip(boxes.examples, objects):
        where = [f"{path}: annotation {a.get('id', '?')} (image {det.id!r})" for a in anns]
        points = []
        for ann, named in zip(anns, where):
            values = ann.get("keypoints")
            if not (isinstance(values, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)):
                raise DataError(f"{named}: keypoints {str(values)[:60]}; expected a list of [x, y, v] * {k} numbers in pixels")
            if len(values) != 3 * k:
                raise DataError(f"{named}: {len(values) / 3:g} keypoints ({len(values)} numbers); expected {k} "
                                f"(the category's keypoints), as x, y, v each")
            points.append([(x / det.width, y / det.height, v) for x, y, v in zip(values[0::3], values[1::3], values[2::3])])
        areas = [a.get("area") if isinstance(a.get("area"), (int, float)) and a.get("area", 0) > 0 else None for a in anns]
        counted = [a.get("num_keypoints") for a in anns]
        for a, c, named in zip(anns, counted, where):
            if c is not None and not (isinstance(c, int) and not isinstance(c, bool)):
                raise DataError(f"{named}: num_keypoints {c!r}; expected a whole number")
        examples.append(pose_example(det, points, k, where, areas, counted))
    return PoseSource(boxes.spec, "coco", boxes.labels, examples, shape)


def _layout(categories: list, path: Path):
    """The one keypoint layout every category shares."""
    first = None
    for c in categories:
        names = c.get("keypoints")
        if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
            raise DataError(f"{path}: category {c['id']} ({c.get('name')!r}) has keypoints {str(names)[:60]}; expected "
                            "COCO keypoints: each category's 'keypoints' names")
        skeleton = c.get("skeleton", [])
        if not (isinstance(skeleton, list) and all(isinstance(b, list) and len(b) == 2 for b in skeleton)):
            raise DataError(f"{path}: category {c['id']} has skeleton {str(skeleton)[:60]}; expected pairs of 1-based "
                            "keypoint numbers")
        bones = [[i - 1 if isinstance(i, int) and not isinstance(i, bool) else i for i in b] for b in skeleton]
        where = f"{path}: category {c['id']} ({c.get('name')!r})"
        this = layout(names, bones, c.get("flip_idx"), c.get("sigmas"), where)
        if first is not None and this != first:
            raise DataError(f"{where} has another keypoint layout than category {categories[0]['id']}; expected every "
                            "category to share one (the same keypoints, skeleton and sigmas)")
        first = this
    return first
