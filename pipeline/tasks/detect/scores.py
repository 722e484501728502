"""How a detection run's parity scores a detector's objects: COCOeval's mAP@.5, mAP@[.5:.95] and AP per class
(pipeline/tasks/detect/evaluate.py), the precision-recall curve at IoU 0.5, agreement with the float model's
detections, the gate's view of a row (exact scores, agreement counted in detections) and the no-skill detector
the gate's floor holds every model above (NoSkill below, worded by pipeline/gate.py's Floor).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from pipeline.gate import FloorWords

AGREEMENT_SCORE = 0.4  # pycoral's and Frigate's default threshold: the detections a user sees
AGREEMENT_IOU = 0.5


def metrics():
    from pipeline.gate import Metric

    return {"map50": Metric("map50", "mAP@.5", "mAP@.5"), "map": Metric("map", "mAP@[.5:.95]", "mAP@[.5:.95]")}


def scored_entry(examples: Sequence, found: Sequence, reference: Sequence, labels: Sequence[str]) -> dict:
    """A model's (or a client's) detections scored: COCOeval's mAP, mAP@.5 and AP per class, and agreement with
    the reference's detections."""
    from pipeline.tasks.detect.evaluate import evaluate

    scores = evaluate(examples, found, labels)
    matched, total = agreement(reference, found)
    return {"map": scores.map, "map50": scores.map50, "per_class": scores.as_dict()["per_class"],
            "agreement": matched / total if total else 1.0, "agree": matched, "detections": total, "images": len(examples)}


def detections(detector, pixels: Sequence[np.ndarray], ids: Sequence[str]) -> list:
    """An opened TFLite detector's objects on contract pixels at its input size, every one the op keeps, boxes normalized."""
    from edge.answers.detect import detect_pixels
    from pipeline.tasks.detect.evaluate import Detections

    found = []
    for p, what in zip(pixels, ids):
        objects = detect_pixels(detector, p, (1, 1), threshold=0.0, what=what)
        found.append(Detections(np.array([[o.box.ymin, o.box.xmin, o.box.ymax, o.box.xmax] for o in objects], np.float32).reshape(-1, 4),
                                np.array([o.id for o in objects], np.int32), np.array([o.score for o in objects], np.float32)))
    return found


def gate_scores(entry: dict) -> dict:
    """A model entry (map, map50, agree of detections) as the gate sees it: mAP exactly as shown, agreement counted."""
    from pipeline import gate

    return {"map50": exact_score(entry["map50"]), "map": exact_score(entry["map"]),
            gate.AGREEMENT: gate.Score.counted(entry["agree"], entry["detections"], "detections") if entry["detections"]
            else gate.Score(Fraction(1), 1.0)}


def gate_limits(limits):
    """The user's limits as a detection run's gate applies them: --max-drop on mAP@.5; agreement only when
    --min-agreement is given (classification's default, 0.98 of images, is not a limit for detections)."""
    from pipeline import gate

    given = limits.min_agreement if limits.min_agreement != gate.GATE.min_agreement else 0.0
    return gate.GateLimits(limits.max_drop, given, "map50", limits.min_accuracy).validate(metrics())


class NoSkill(NamedTuple):
    """What a detector that learned nothing about where objects are scores: one box per image, of the most
    frequent held-out class, at that class's mean held-out box."""

    label: int
    name: str
    box: tuple  # normalized ymin, xmin, ymax, xmax
    map50: float
    images: int

    words = FloorWords("no_skill", "a detector with no skill", "better than one box of the most frequent class per image",
                       "--min-accuracy (mAP@.5)", " (an mAP@.5 floor for a detection run)")

    @property
    def rate(self) -> float:
        return self.map50

    @property
    def exact(self) -> Fraction:
        """The mAP@.5 a model must beat, as the report shows it (6 places)."""
        return Fraction(str(round(self.map50, 6)))

    def brief(self) -> str:
        return f"no-skill: one {self.name!r} box per image"

    def describe(self) -> str:
        box = ", ".join(f"{v:.3f}" for v in self.box)
        return (f"{self.map50:.4f} (one {self.name!r} box per image at its mean held-out box [{box}], "
                f"{self.images} images)")

    def as_dict(self) -> Dict[str, object]:
        return {"class": self.name, "label": self.label, "box": list(self.box), "map50": self.map50, "images": self.images}


def no_skill(examples: Sequence, labels: Sequence[str]) -> NoSkill:
    """The no-skill detector's mAP@.5 on `examples`, by the same COCOeval as the models.

    Finding nothing scores 0, which any detector that outputs a box beats by luck; answering the most frequent
    class at its average place is the detection counterpart of always answering the majority class: it knows
    the class frequencies and where objects tend to be, and nothing about the image. Each image gets the same
    box with score 1, so its precision-recall curve is that of a fixed guess, and a model at or under it has
    learned nothing that carries over to new images."""
    from pipeline.tasks.detect.evaluate import Detections, evaluate

    classes = np.concatenate([np.asarray(e.classes, np.int64) for e in examples] or [np.zeros(0, np.int64)])
    if not classes.size:
        return NoSkill(0, labels[0] if labels else "", (0.0, 0.0, 0.0, 0.0), 0.0, len(examples))
    label = int(np.bincount(classes, minlength=len(labels)).argmax())
    boxes = np.concatenate([np.asarray(e.boxes, np.float32)[np.asarray(e.classes) == label] for e in examples])
    box = boxes.mean(axis=0).astype(np.float32)
    guess = Detections(box[None], np.array([label], np.int32), np.array([1.0], np.float32))
    score = evaluate(examples, [guess] * len(examples), labels).map50
    return NoSkill(label, labels[label], tuple(float(v) for v in box), max(score, 0.0), len(examples))


def exact_score(value: float):
    from pipeline.gate import Score

    return Score(Fraction(str(round(value, 6))), value)


RECALL_POINTS = 101  # COCOeval's recall grid, 0 to 1 in steps of 0.01


def precision_recall_50(examples: Sequence, found: Sequence, labels: Sequence[str]) -> List[Optional[float]]:
    """Precision at each of COCOeval's 101 recall points at IoU 0.5, the mean over the classes present (None where
    no class reaches that recall): the curve whose area is mAP@.5, from COCOeval's own precision array."""
    import contextlib
    import io

    from pycocotools.cocoeval import COCOeval

    from pipeline.tasks.detect.evaluate import coco_ground_truth, coco_results

    gt = coco_ground_truth(examples, labels)
    rows = coco_results(examples, found)
    if not rows or not gt.dataset["annotations"]:
        return [None] * RECALL_POINTS
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress lines
        run = COCOeval(gt, gt.loadRes(rows), "bbox")
        run.evaluate()
        run.accumulate()
    # [IoU thresholds, recall points, classes, areas, max detections]: IoU .5, all areas, 100 detections
    precision = run.eval["precision"][0, :, :, 0, -1]
    curve = []
    for row in precision:
        present = row[row > -1]
        curve.append(round(float(present.mean()), 6) if present.size else None)
    return curve


def agreement(reference: Sequence, other: Sequence):
    """(matched, total): the reference's detections scoring >= AGREEMENT_SCORE that `other` finds too."""
    matched = total = 0
    for a, b in zip(reference, other):
        mine = [(box, c) for box, c, s in zip(b.boxes, b.classes, b.scores) if s >= AGREEMENT_SCORE]
        for box, c, s in zip(a.boxes, a.classes, a.scores):
            if s < AGREEMENT_SCORE:
                continue
            total += 1
            matched += any(c == c2 and iou(box, box2) >= AGREEMENT_IOU for box2, c2 in mine)
    return matched, total


def iou(a, b) -> float:
    ih = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iw = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ih * iw
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
