"""A pose model's side of `pipeline parity` (pipeline/tasks/comparison.py): the float model (decoded as the exported file
is read: the run's head's `reference`), the float TFLite model (when exported) and the int8 model on the CPU, on the
same held-out images through the same pixel contract, each scored by COCO's keypoint evaluator with the run's OKS sigmas
(OKS mAP@.5, OKS mAP@[.5:.95]), box mAP and each keypoint's pixel error (scores.py). The gate limits the int8 model's
OKS mAP@.5 drop (default 1 pp, --max-drop) and holds every model above a no-skill pose (NoSkillPose below).

Agreement is detection's (pipeline/tasks/detect/scores.py): the share of the float model's objects scoring at least
0.4 that the other model finds with box IoU >= 0.5 and the same class.

No known client reads edgeflow's int8 pose file: each has a client row naming why it cannot (clients.py), and a client
--clients gates fails the gate with that reason. Ultralytics reads the file `pipeline export RUN --int8 --layout
ultralytics` writes beside it (one class), tested with Ultralytics itself, not scored here.

A device's results (`edge evaluate` of the int8 model on the run's bundle, "task": "pose") are read as a detector's
objects, each with its keypoints [x, y, score] normalized to the image as its box is, and scored as a model's row
(device_cpu, or edgetpu on a board) by the same evaluator and gate as int8's.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from fractions import Fraction
from typing import Dict, List, NamedTuple, Sequence

import numpy as np

from pipeline.errors import DataError
from pipeline.gate import REFERENCE, FloorWords, Metric
from pipeline.tasks.comparison import Comparison, Held
from pipeline.tasks.detect.scores import AGREEMENT_IOU, AGREEMENT_SCORE, agreement, exact_score

METRICS = {"oks_map50": Metric("oks_map50", "OKS mAP@.5", "OKS mAP@.5"),
           "oks_map": Metric("oks_map", "OKS mAP@[.5:.95]", "OKS mAP@[.5:.95]"),
           "box_map50": Metric("box_map50", "box mAP@.5", "box mAP@.5")}
GATE_METRIC = "oks_map50"


class PoseComparison(Comparison):
    name = "pose"
    holds = "a pose model's objects and keypoints"
    metrics = METRICS
    floor_metric = GATE_METRIC

    def heldout(self, config, run) -> Held:
        """The recorded held-out images, checked against the identities training recorded; or those of --data, checked
        to hold the run's classes and keypoints and no image it trained or tuned on (data/heldout.py)."""
        from pipeline.tasks.detect.parity import heldout_images
        from pipeline.tasks.pose.data.heldout import given_heldout, recorded_heldout, run_layout

        self.layout = run_layout(run)
        self.num_classes = len(run.labels)
        held, self.heldout_record = heldout_images(run, config.data, given_heldout, recorded_heldout)
        return held

    def reference(self, run, held: Held) -> list:
        from pipeline.tasks.pose import heads

        return heads.of_run(run).reference(run, held.pixels)

    def open(self, run, key: str, config):
        from edge.answers.pose import open_pose
        from pipeline.console import native_quiet

        with native_quiet():  # the interpreter's C++ start-up line is not the user's business
            return open_pose(run.artifact(key))

    def answers(self, opened, held: Held) -> list:
        """Every pose the device's reading keeps (edge.answers.detect's, whose objects carry a pose model's keypoints),
        with no score threshold: an mAP needs the low-scoring ones too."""
        from edge.answers.detect import detect_pixels
        from pipeline.tasks.pose.poses import Poses

        found = []
        for pixels, what in zip(held.pixels, held.ids):
            objects = detect_pixels(opened, pixels, (1, 1), threshold=0.0, what=what)  # normalized: a 1 x 1 image
            found.append(Poses(np.array([[o.box.ymin, o.box.xmin, o.box.ymax, o.box.xmax] for o in objects], np.float32).reshape(-1, 4),
                               np.array([o.id for o in objects], np.int32), np.array([o.score for o in objects], np.float32),
                               np.array([o.keypoints for o in objects], np.float32).reshape(len(objects), self.layout.count, 3)))
        return found

    def clients(self, opened, files: Sequence[bytes]):
        """No answers: every known client is refused with its reason (clients.py), none fed."""
        from pipeline.tasks.pose.clients import reasons

        return {}, reasons(self.num_classes)

    def device_answers(self, checked, run, held: Held) -> list:
        """The poses `edge evaluate` found: each object's class one of the run's, its keypoints K (x, y, score) triples
        normalized to the image as its box is."""
        from pipeline.tasks.pose.poses import Poses

        k = self.layout.count
        found = []
        for i, p in enumerate(checked.results.predictions):
            for o in p.objects:
                if not 0 <= o["id"] < len(run.labels):
                    raise DataError(f"device result {i} ({p.id}) has class id {o['id']}; expected one below {len(run.labels)}")
                points = o.get("keypoints")
                if not (isinstance(points, list) and len(points) == k and all(isinstance(t, list) and len(t) == 3 for t in points)):
                    raise DataError(f"device result {i} ({p.id}) has an object whose keypoints are {str(points)[:60]}; "
                                    f"expected {k} [x, y, score] triples from `edge evaluate` of a pose model")
            found.append(Poses(np.array([o["box"] for o in p.objects], np.float32).reshape(-1, 4),
                               np.array([o["id"] for o in p.objects], np.int32),
                               np.array([o["score"] for o in p.objects], np.float32),
                               np.array([o["keypoints"] for o in p.objects], np.float32).reshape(-1, k, 3)))
        return found

    def entry(self, held: Held, found: list, reference: list) -> dict:
        from pipeline.tasks.pose.scores import evaluate

        scores = evaluate(held.truth, found, held.labels, self.layout)
        matched, total = agreement(reference, found)
        return {**scores.as_dict(), "agreement": matched / total if total else 1.0, "agree": matched, "detections": total,
                "images": len(held.truth)}

    def client_rows(self, held, found, refused, entries, reference, named) -> Dict[str, dict]:
        """Each client's row: how it reads a pose file, whether --clients gates it, and why it cannot read this one."""
        from pipeline.tasks.pose.clients import CLIENTS

        return {name: {"feed": client.says, "gated": name in named, "refused": refused[name]}
                for name, client in CLIENTS.items()}

    def limits(self, limits):
        """--max-drop on OKS mAP@.5 (or --gate-metric's); agreement only when --min-agreement is given (classification's
        default, 0.98 of images, is not a limit for objects)."""
        from pipeline import gate

        given = limits.min_agreement if limits.min_agreement != gate.GATE.min_agreement else 0.0
        metric = limits.metric if limits.metric in METRICS else GATE_METRIC
        return gate.GateLimits(limits.max_drop, given, metric, limits.min_accuracy).validate(METRICS)

    def gate_scores(self, entry: dict) -> dict:
        from pipeline import gate

        return {**{key: exact_score(entry[key]) for key in METRICS},
                gate.AGREEMENT: gate.Score.counted(entry["agree"], entry["detections"], "detections") if entry["detections"]
                else gate.Score(Fraction(1), 1.0)}

    def chance(self, held: Held):
        return no_skill(held.truth, held.labels, self.layout)

    def report(self, config, run, held: Held, entries, clients, device, verdict, answers) -> dict:
        if device is not None:  # the device's facts on its row: the results file, the model it ran, its backend
            entries[next(name for name in answers if name in ("edgetpu", "device_cpu"))]["device"] = device
        examples = held.truth
        objects = int(sum(len(e.boxes) for e in examples))
        return {"task": "pose", "reference": REFERENCE, "models": entries, "clients": clients, "gate": verdict,
                "images": len(examples), "objects": objects,
                "heldout": {**self.heldout_record, "images": len(examples), "objects": objects},
                "keypoints": self.layout.as_dict(),
                "agreement": {"score_at_least": AGREEMENT_SCORE, "iou_at_least": AGREEMENT_IOU, "same_class": True}}

    def write(self, run, report: dict, answers, held: Held, failures: List[str]):
        from pipeline.rundir.files import json_bytes

        kept = ("oks_map", "oks_map50", "box_map", "box_map50", "agreement")
        with run.transaction() as t:
            t.write("parity_report", json_bytes(report))
            t.set("parity", {**{name: {k: m[k] for k in kept} for name, m in report["models"].items()},
                             "clients": {name: {"refused": c["refused"], "gated": c["gated"]}
                                         for name, c in report["clients"].items()},
                             "passed": not failures, "failures": failures})
        return run.dir / "parity"

    def summary(self, report: dict) -> str:
        from pipeline.tasks.detect.report import heldout_line

        lines = [heldout_line(report), f"{'model':<18} {'OKS@.5':>8} {'OKS@[.5:.95]':>13} {'box@.5':>8} {'px error':>9} {'agreement':>10} {'drop pp':>8}"]
        reference = report["models"][report["reference"]]["oks_map50"]
        for name, m in report["models"].items():
            error = m["pixel_error"]["mean"]
            lines.append(f"{name:<18} {m['oks_map50']:8.4f} {m['oks_map']:13.4f} {m['box_map50']:8.4f} "
                         f"{'n/a' if error is None else format(error, '.2f'):>9} {m['agreement']:10.4f} "
                         f"{(reference - m['oks_map50']) * 100:8.2f}")
        for name, c in report["clients"].items():
            lines.append(f"client {name}: cannot read model_int8.tflite: {c['refused']}")
        g = report["gate"]
        lines.append(f"gate ({g['metric']} drop <= {g['max_drop_pp']:g} pp for {', '.join(g['applies_to'])}), floor "
                     f"{g['floor_rule']}: " + ("PASSED" if g["passed"] else "FAILED: " + "; ".join(g["failures"])))
        return "\n".join(lines)


class NoSkillPose(NamedTuple):
    """What a pose model that learned nothing about the image scores: one object per image, of the most frequent
    held-out class, at that class's mean held-out box with its mean keypoints."""

    label: int
    name: str
    box: tuple
    oks_map50: float
    images: int

    words = FloorWords("no_skill", "a pose model with no skill", "better than one mean pose of the most frequent class "
                       "per image", "--min-accuracy (OKS mAP@.5)", " (an OKS mAP@.5 floor for a pose run)")

    @property
    def rate(self) -> float:
        return self.oks_map50

    @property
    def exact(self) -> Fraction:
        return Fraction(str(round(self.oks_map50, 6)))

    def brief(self) -> str:
        return f"no-skill: one mean {self.name!r} pose per image"

    def describe(self) -> str:
        return f"{self.oks_map50:.4f} (one {self.name!r} pose per image at its mean held-out box and keypoints, {self.images} images)"

    def as_dict(self) -> Dict[str, object]:
        return {"class": self.name, "label": self.label, "box": list(self.box), "oks_map50": self.oks_map50,
                "images": self.images}


def no_skill(examples: Sequence, labels: Sequence[str], layout) -> NoSkillPose:
    """The no-skill pose model's OKS mAP@.5 on `examples`, by the same evaluator as the models."""
    from pipeline.tasks.pose.poses import Poses
    from pipeline.tasks.pose.scores import oks_map

    classes = np.concatenate([np.asarray(e.classes, np.int64) for e in examples] or [np.zeros(0, np.int64)])
    if not classes.size:
        return NoSkillPose(0, labels[0] if labels else "", (0.0, 0.0, 0.0, 0.0), 0.0, len(examples))
    label = int(np.bincount(classes, minlength=len(labels)).argmax())
    boxes = np.concatenate([np.asarray(e.boxes, np.float32)[np.asarray(e.classes) == label] for e in examples])
    points = np.concatenate([np.asarray(e.keypoints, np.float32)[np.asarray(e.classes) == label] for e in examples])
    labelled = points[..., 2] > 0
    mean = np.zeros((points.shape[1], 3), np.float32)
    for k in range(points.shape[1]):
        if labelled[:, k].any():
            mean[k] = (*points[labelled[:, k], k, :2].mean(axis=0), 1.0)
    box = boxes.mean(axis=0).astype(np.float32)
    guess = Poses(box[None], np.array([label], np.int32), np.ones(1, np.float32), mean[None])
    score = oks_map(examples, [guess] * len(examples), labels, layout)[1]
    return NoSkillPose(label, labels[label], tuple(float(v) for v in box), score, len(examples))
