"""How pose answers are scored: COCO's keypoint evaluator (pycocotools' COCOeval, iouType "keypoints") with the
layout's OKS sigmas, detection's box mAP on the same answers, and each keypoint's error in pixels on the objects a
prediction found.

OKS scales each keypoint's distance by the object's area (PoseExample.areas: COCO's own area where the data gives it,
else the box's) and the keypoint's sigma; a ground-truth object with no labelled keypoint is ignored, as COCO ignores
it. mAP@[.5:.95] is stats[0], mAP@.5 stats[1].
"""
from __future__ import annotations

import contextlib
import io
from typing import Dict, List, NamedTuple, Sequence

import numpy as np

MATCH_IOU = 0.5  # a prediction is an object's (for the pixel error) when its box overlaps the object's this much


class PoseScores(NamedTuple):
    oks_map: float  # OKS mAP@[.5:.95]
    oks_map50: float  # OKS mAP@.5
    box_map: float  # box mAP@[.5:.95] (COCOeval bbox)
    box_map50: float
    pixel_error: Dict[str, object]  # per keypoint name: mean distance in pixels over matched labelled keypoints; "mean"; "matched"

    def as_dict(self) -> dict:
        return {"oks_map": self.oks_map, "oks_map50": self.oks_map50, "box_map": self.box_map, "box_map50": self.box_map50,
                "pixel_error": self.pixel_error}


def keypoint_ground_truth(examples: Sequence, labels: Sequence[str], names: Sequence[str]):
    """COCO's ground truth of `examples` (image ids their positions), keypoints in pixels."""
    from pycocotools.coco import COCO

    images, annotations = [], []
    for n, e in enumerate(examples):
        images.append({"id": n, "width": e.width, "height": e.height, "file_name": e.id})
        for box, c, points, count, area in zip(e.boxes, e.classes, e.keypoints, e.num_keypoints, e.areas):
            x, y, w, h = _box_pixels(box, e)
            annotations.append({"id": len(annotations) + 1, "image_id": n, "category_id": int(c), "bbox": [x, y, w, h],
                                "area": float(area), "iscrowd": 0, "num_keypoints": int(count),
                                "keypoints": _keypoint_pixels(points, e, visibility=True)})
        for box, c in zip(getattr(e, "crowd", ()), getattr(e, "crowd_classes", ())):
            x, y, w, h = _box_pixels(box, e)
            # iscrowd 1: COCOeval matches detections to it last and counts them neither right nor wrong
            annotations.append({"id": len(annotations) + 1, "image_id": n, "category_id": int(c), "bbox": [x, y, w, h],
                                "area": w * h, "iscrowd": 1, "num_keypoints": 0, "keypoints": [0] * (3 * len(names))})
    gt = COCO()
    gt.dataset = {"images": images, "annotations": annotations,
                  "categories": [{"id": i, "name": name, "keypoints": list(names)} for i, name in enumerate(labels)]}
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress lines
        gt.createIndex()
    return gt


def keypoint_results(examples: Sequence, predictions: Sequence) -> List[dict]:
    """COCO's keypoint results form (what `pipeline predict` writes): image ids their positions, keypoints in pixels
    with each keypoint's score in place of its visibility."""
    rows = []
    for n, (e, p) in enumerate(zip(examples, predictions)):
        for box, c, s, points in zip(p.boxes, p.classes, p.scores, p.keypoints):
            rows.append({"image_id": n, "category_id": int(c), "bbox": list(_box_pixels(box, e)), "score": float(s),
                         "keypoints": _keypoint_pixels(points, e, visibility=False)})
    return rows


def oks_map(examples: Sequence, predictions: Sequence, labels: Sequence[str], layout) -> tuple:
    """(OKS mAP@[.5:.95], OKS mAP@.5) by COCOeval with `layout`'s sigmas."""
    from pycocotools.cocoeval import COCOeval

    if len(examples) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} images; expected one per image")
    gt = keypoint_ground_truth(examples, labels, layout.names)
    rows = keypoint_results(examples, predictions)
    if not rows or not any(a["num_keypoints"] for a in gt.dataset["annotations"]):
        return 0.0, 0.0  # COCOeval cannot load an empty result list; nothing found (or nothing to find) scores 0
    with contextlib.redirect_stdout(io.StringIO()):
        run = COCOeval(gt, gt.loadRes(rows), "keypoints")
        run.params.kpt_oks_sigmas = np.asarray(layout.sigmas, np.float64)
        run.evaluate()
        run.accumulate()
        run.summarize()
    return max(float(run.stats[0]), 0.0), max(float(run.stats[1]), 0.0)


def pixel_error(examples: Sequence, predictions: Sequence, names: Sequence[str]) -> Dict[str, object]:
    """Each keypoint's mean distance in pixels between an object and the prediction that found it (the highest-scoring
    one of its class whose box overlaps it by MATCH_IOU, each prediction used once), over its labelled keypoints."""
    from pipeline.tasks.detect.scores import iou

    sums, counts, matched, objects = np.zeros(len(names)), np.zeros(len(names)), 0, 0
    for e, p in zip(examples, predictions):
        order = np.argsort(-np.asarray(p.scores, np.float64), kind="stable")
        free = list(order)
        for box, c, truth in zip(e.boxes, e.classes, e.keypoints):
            objects += 1
            best = max((j for j in free if int(p.classes[j]) == int(c)), key=lambda j: iou(box, p.boxes[j]), default=None)
            if best is None or iou(box, p.boxes[best]) < MATCH_IOU:
                continue
            free.remove(best)
            matched += 1
            labelled = truth[:, 2] > 0
            dx = (p.keypoints[best][:, 0] - truth[:, 0]) * e.width
            dy = (p.keypoints[best][:, 1] - truth[:, 1]) * e.height
            sums += np.where(labelled, np.hypot(dx, dy), 0.0)
            counts += labelled
    per = {name: (float(s / n) if n else None) for name, s, n in zip(names, sums, counts)}
    return {**per, "mean": float(sums.sum() / counts.sum()) if counts.sum() else None, "matched": matched, "objects": objects}


def evaluate(examples: Sequence, predictions: Sequence, labels: Sequence[str], layout) -> PoseScores:
    """Every score of `predictions` (List[Poses]) on `examples` (PoseExamples)."""
    from pipeline.tasks.detect.evaluate import Detections, evaluate as box_evaluate

    oks, oks50 = oks_map(examples, predictions, labels, layout)
    boxes = box_evaluate(examples, [Detections(p.boxes, p.classes, p.scores) for p in predictions], labels)
    return PoseScores(oks, oks50, boxes.map, boxes.map50, pixel_error(examples, predictions, layout.names))


def truth_as_poses(example) -> "Poses":
    """The ground truth of one example as a perfect model would answer it (every object, score 1)."""
    from pipeline.tasks.pose.poses import Poses

    points = np.array(example.keypoints, np.float32).copy()
    points[..., 2] = 1.0
    return Poses(np.asarray(example.boxes, np.float32), np.asarray(example.classes, np.int32),
                 np.ones(len(example.boxes), np.float32), points)


def _box_pixels(box, e):
    ymin, xmin, ymax, xmax = (float(v) for v in box)
    return xmin * e.width, ymin * e.height, (xmax - xmin) * e.width, (ymax - ymin) * e.height


def _keypoint_pixels(points, e, visibility: bool) -> list:
    out = []
    for x, y, v in np.asarray(points, np.float64):
        out += [x * e.width, y * e.height, int(v) if visibility else float(v)]
    return out
