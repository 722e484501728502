"""COCO's own evaluator (pycocotools' COCOeval) on examples in the in-memory form.

Ground truth and predictions are normalized (ymin, xmin, ymax, xmax) boxes with 0-based classes; they
are turned into COCO's pixel [x, y, w, h] with each image's size. mAP@[.5:.95] is stats[0], mAP@.5
stats[1]; per-class AP is the mean precision over IoU thresholds and recall points for that class.
"""
from __future__ import annotations

import contextlib
import io
from typing import Dict, List, NamedTuple, Sequence

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from pipeline.tasks.detect.data.examples import DetExample


class Detections(NamedTuple):
    """One image's predictions."""

    boxes: np.ndarray  # float32 [N, 4] normalized ymin, xmin, ymax, xmax
    classes: np.ndarray  # int [N], 0-based
    scores: np.ndarray  # float [N]


class CocoScores(NamedTuple):
    map: float  # mAP@[.5:.95]
    map50: float  # mAP@.5
    per_class: Dict[str, float]  # AP@[.5:.95] per class name; nan for a class absent from the ground truth

    def as_dict(self) -> dict:
        return {"map": self.map, "map50": self.map50,
                "per_class": {k: (None if np.isnan(v) else v) for k, v in self.per_class.items()}}


def coco_ground_truth(examples: Sequence[DetExample], labels: Sequence[str]) -> COCO:
    images, annotations = [], []
    for n, e in enumerate(examples):
        images.append({"id": n, "width": e.width, "height": e.height, "file_name": e.id})
        crowd = getattr(e, "crowd", np.zeros((0, 4)))
        for box, c, is_crowd in [*((b, c, 0) for b, c in zip(e.boxes, e.classes)),
                                 *((b, c, 1) for b, c in zip(crowd, getattr(e, "crowd_classes", ())))]:
            x, y, w, h = _pixels(box, e)
            # iscrowd 1: COCOeval matches detections to it last and counts them neither right nor wrong.
            annotations.append({"id": len(annotations) + 1, "image_id": n, "category_id": int(c), "bbox": [x, y, w, h],
                                "area": w * h, "iscrowd": is_crowd})
    gt = COCO()
    gt.dataset = {"images": images, "annotations": annotations,
                  "categories": [{"id": i, "name": name} for i, name in enumerate(labels)]}
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress lines
        gt.createIndex()
    return gt


def coco_results(examples: Sequence[DetExample], predictions: Sequence[Detections]) -> List[dict]:
    """COCO's results format (what `pipeline predict` would write), image ids being positions."""
    rows = []
    for n, (e, p) in enumerate(zip(examples, predictions)):
        for box, c, s in zip(p.boxes, p.classes, p.scores):
            rows.append({"image_id": n, "category_id": int(c), "bbox": list(_pixels(box, e)), "score": float(s)})
    return rows


def evaluate(examples: Sequence[DetExample], predictions: Sequence[Detections], labels: Sequence[str]) -> CocoScores:
    if len(examples) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} images; expected one per image")
    gt = coco_ground_truth(examples, labels)
    rows = coco_results(examples, predictions)
    if not rows or not gt.dataset["annotations"]:
        # COCOeval cannot load an empty result list; no detection (or nothing to find) scores 0.
        return CocoScores(0.0, 0.0, {name: float("nan") if not gt.dataset["annotations"] else 0.0 for name in labels})
    with contextlib.redirect_stdout(io.StringIO()):
        dt = gt.loadRes(rows)
        run = COCOeval(gt, dt, "bbox")
        run.evaluate()
        run.accumulate()
        run.summarize()
    precision = run.eval["precision"]  # [IoU thresholds, recall points, classes, areas, max detections]
    per_class = {}
    for k, name in enumerate(labels):
        values = precision[:, :, k, 0, -1]
        values = values[values > -1]
        per_class[name] = float(values.mean()) if values.size else float("nan")
    return CocoScores(float(run.stats[0]), float(run.stats[1]), per_class)


def _pixels(box, e: DetExample):
    ymin, xmin, ymax, xmax = (float(v) for v in box)
    return xmin * e.width, ymin * e.height, (xmax - xmin) * e.width, (ymax - ymin) * e.height
