"""`pipeline parity` of a detection run: the float SavedModel, the float TFLite model and the int8 model on the same
held-out images through the same pixel contract, each scored by COCOeval (mAP@.5, mAP@[.5:.95], AP per class),
their agreement with the float model, the precision-recall curve at IoU 0.5 per model and the held-out images
where int8 (or the device) and float disagree, drawn for the report; the gate limits the int8 model's mAP@.5
drop (pipeline/gate.py) and holds every model above a no-skill floor (NoSkillFloor below), or above --min-accuracy read as an mAP@.5 floor.

The float SavedModel's boxes go through what TFLite_Detection_PostProcess does (decode against the anchors, one
class per box, class-agnostic non-maximum suppression, the op's thresholds), so the comparison is of the
models, not of two post-processing recipes. Agreement: the share of the float model's detections scoring at
least 0.4 (the clients' threshold) that the other model matches with IoU >= 0.5 and the same class.

Each known detector client (pipeline/inference/client_scores.py DETECT_CLIENTS: edgeflow's contract, pycoral's
detect_image.py letterbox, MediaPipe's ObjectDetector, Frigate's square region) gets a row of its own: the int8
model on the int8 row's interpreter, fed each held-out file as that client feeds it, its boxes mapped back to the
picture as that client maps them, scored as the int8 row is. The rows are reported; --clients pycoral,frigate
gates the named ones' mAP@.5 drop like the int8 model's.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from fractions import Fraction
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from pipeline.errors import ConfigError, DataError
from pipeline.inference.parity_report import ClientRows

REFERENCE = "float_savedmodel"
MODELS = {"float_tflite_cpu": "model_float", "int8_cpu": "model_int8"}
GATED = ("int8_cpu",)
AGREEMENT_SCORE = 0.4  # pycoral's and Frigate's default threshold: the detections a user sees
AGREEMENT_IOU = 0.5


class Outcome(NamedTuple):
    report_dir: object
    report: dict
    failures: List[str]


def metrics():
    from pipeline.gate import Metric

    return {"map50": Metric("map50", "mAP@.5", "mAP@.5"), "map": Metric("map", "mAP@[.5:.95]", "mAP@[.5:.95]")}


def parity(config, run) -> Outcome:
    from edge.bundle import image_file
    from edge.detect import open_detector
    from pipeline import gate
    from pipeline.console import native_quiet
    from pipeline.inference.client_scores import detect_clients, for_task
    from pipeline.rundir.files import json_bytes

    if config.data is not None:
        raise ConfigError("--data applies to classification runs; a detection run's parity "
                          "compares its models on the recorded held-out images")
    named = for_task(config.clients, "detect")  # a client detectors have none of: refused before any work
    missing = [key for key in MODELS.values() if not run.has(key)]
    if missing:
        raise ConfigError(f"{run.dir} has no {' or '.join(missing)}; run `pipeline export RUN` and `pipeline export RUN --int8` first")
    examples = heldout_images(run)
    labels = run.labels
    device = _device_results(config.device_results, run, examples) if config.device_results is not None else None
    with native_quiet():  # the interpreter's C++ start-up line is not the user's business
        opened = {name: open_detector(run.artifact(key)) for name, key in MODELS.items()}
    # Every model is fed the same pixels: the float TFLite model's contract (raw pixels, stretched to the input).
    pixels = [opened["float_tflite_cpu"].runner.pixels(e.image, e.id) for e in examples]
    predictions = {REFERENCE: _savedmodel(run, pixels)}
    for name, detector in opened.items():
        predictions[name] = detections(detector, pixels, [e.id for e in examples])
    gated = GATED
    if device is not None:
        name = "edgetpu" if device["edgetpu"] else "device_cpu"
        predictions[name] = device.pop("detections")
        gated = (*GATED, name)
    models: Dict[str, dict] = {}
    for name, found in predictions.items():
        models[name] = {**scored_entry(examples, found, predictions[REFERENCE], labels),
                        "precision_at_recall_50": precision_recall_50(examples, found, labels)}
    if device is not None:
        models[name]["device"] = device
    # The clients on the int8 row's own interpreter: only the feed and the way back differ. The files as the bundle ships them.
    files = [image_file(i, e.id, e.image)[1] for i, e in enumerate(examples)]
    found, refused = detect_clients(opened["int8_cpu"], files)
    limits = gate.GateLimits(config.max_drop, config.min_agreement, "map50", config.min_accuracy)
    clients, failures, verdict = judge(examples, labels, models, predictions[REFERENCE], found, refused, named, limits, gated)
    shown = [name for name in predictions if name not in (REFERENCE, "float_tflite_cpu")]
    report = {"task": "detect", "reference": REFERENCE, "models": models, "clients": clients, "gate": verdict,
              "images": len(examples),
              "objects": int(sum(len(e.boxes) for e in examples)),
              "disagreements": disagreements(examples, predictions[REFERENCE], {n: predictions[n] for n in shown}),
              "agreement": {"score_at_least": AGREEMENT_SCORE, "iou_at_least": AGREEMENT_IOU, "same_class": True}}
    report_dir = run.dir / "parity"
    with run.transaction() as t:
        t.write("parity_report", json_bytes(report))
        t.set("parity", {**{name: {k: m[k] for k in ("map", "map50", "agreement")} for name, m in models.items()},
                         "clients": {name: ({"refused": c["refused"]} if "refused" in c else
                                            {k: c[k] for k in ("map", "map50", "agreement", "drop_pp")}) | {"gated": c["gated"]}
                                     for name, c in clients.items()},
                         "passed": not failures, "failures": failures})
    return Outcome(report_dir, report, failures)


class Judged(NamedTuple):
    clients: Dict[str, dict]  # report.json's "clients": each client's row (scored as a model is), or why it cannot feed
    failures: List[str]
    gate: dict  # gate.record


def judge(examples: Sequence, labels: Sequence[str], models: Dict[str, dict], reference: Sequence, found: Dict[str, list],
          refused: Dict[str, str], named: Sequence[str], limits, gated: Sequence[str]) -> Judged:
    """The client rows and the gate's verdict: `models` (scored entries, the reference's among them) and each
    client's detections (client_scores.detect_clients' `found` and `refused`) against the reference's, with the
    user's `limits` on the models in `gated` and on the `named` clients (client_scores.for_task's names)."""
    from pipeline import gate
    from pipeline.inference.client_scores import DETECT_CLIENTS, gate_name

    clients = {}
    for name, client in DETECT_CLIENTS.items():
        head = {"feed": client.says, "gated": name in named}
        if name in refused:
            clients[name] = {**head, "refused": refused[name]}
            continue
        entry = scored_entry(examples, found[name], reference, labels)
        clients[name] = {**head, **entry, "drop_pp": (models[REFERENCE]["map50"] - entry["map50"]) * 100}
    scored = {name: gate_scores(m) for name, m in models.items()}
    scored.update({gate_name(c): gate_scores(clients[c]) for c in named if c not in refused})
    gated = (*gated, *(gate_name(c) for c in named))
    limits = gate_limits(limits)
    floor = NoSkillFloor(no_skill(examples, labels), limits.min_accuracy)
    failures = [f"{gate_name(c)}: cannot feed the model: {refused[c]}" for c in named if c in refused]
    failures += gate.check(scored, limits, metrics(), floor, reference=REFERENCE, gated=gated)
    return Judged(clients, failures, gate.record(limits, floor, [*models, *(gate_name(c) for c in named)], failures, gated))


def scored_entry(examples: Sequence, found: Sequence, reference: Sequence, labels: Sequence[str]) -> dict:
    """A model's (or a client's) detections scored: COCOeval's mAP, mAP@.5 and AP per class, and agreement with
    the reference's detections."""
    from pipeline.detection.evaluate import evaluate

    scores = evaluate(examples, found, labels)
    matched, total = agreement(reference, found)
    return {"map": scores.map, "map50": scores.map50, "per_class": scores.as_dict()["per_class"],
            "agreement": matched / total if total else 1.0, "agree": matched, "detections": total, "images": len(examples)}


def detections(detector, pixels: Sequence[np.ndarray], ids: Sequence[str]) -> list:
    """An opened TFLite detector's objects on contract pixels at its input size, every one the op keeps, boxes normalized."""
    from edge.detect import detect_pixels
    from pipeline.detection.evaluate import Detections

    found = []
    for p, what in zip(pixels, ids):
        objects = detect_pixels(detector, p, (1, 1), threshold=0.0, what=what)
        found.append(Detections(np.array([[o.box.ymin, o.box.xmin, o.box.ymax, o.box.xmax] for o in objects], np.float32).reshape(-1, 4),
                                np.array([o.id for o in objects], np.int32), np.array([o.score for o in objects], np.float32)))
    return found


def gate_scores(entry: dict) -> dict:
    """A model entry (map, map50, agree of detections) as the gate sees it: mAP exactly as shown, agreement counted."""
    from pipeline import gate

    return {"map50": _exact(entry["map50"]), "map": _exact(entry["map"]),
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
    from pipeline.detection.evaluate import Detections, evaluate

    classes = np.concatenate([np.asarray(e.classes, np.int64) for e in examples] or [np.zeros(0, np.int64)])
    if not classes.size:
        return NoSkill(0, labels[0] if labels else "", (0.0, 0.0, 0.0, 0.0), 0.0, len(examples))
    label = int(np.bincount(classes, minlength=len(labels)).argmax())
    boxes = np.concatenate([np.asarray(e.boxes, np.float32)[np.asarray(e.classes) == label] for e in examples])
    box = boxes.mean(axis=0).astype(np.float32)
    guess = Detections(box[None], np.array([label], np.int32), np.array([1.0], np.float32))
    score = evaluate(examples, [guess] * len(examples), labels).map50
    return NoSkill(label, labels[label], tuple(float(v) for v in box), max(score, 0.0), len(examples))


class NoSkillFloor(NamedTuple):
    """The least mAP@.5 a model must reach (the gate's floor, as pipeline/gate.py's Floor is for classification):
    strictly above the no-skill detector's, or --min-accuracy (an mAP@.5 share) when given."""

    chance: NoSkill
    min_accuracy: Optional[float]

    @property
    def metric(self):
        return metrics()["map50"]

    def failure(self, name: str, score) -> Optional[str]:
        said = f"{name}: {self.metric.short} {score.describe()}"
        if self.min_accuracy is None:
            if score.exact > Fraction(str(round(self.chance.map50, 6))):
                return None
            return f"{said} is no better than a detector with no skill, {self.chance.describe()}"
        if score.exact >= Fraction(str(self.min_accuracy)):
            return None
        return f"{said} is under --min-accuracy {self.min_accuracy:g} (an mAP@.5 floor for a detection run)"

    def describe(self) -> str:
        if self.min_accuracy is None:
            return f"{self.metric.short} > {self.chance.map50:.4f} (no-skill: one {self.chance.name!r} box per image)"
        return f"{self.metric.short} >= {self.min_accuracy:g}"

    def as_dict(self) -> Dict[str, object]:
        return {"min_accuracy": self.min_accuracy, "no_skill": self.chance.as_dict(),
                "rule": "better than one box of the most frequent class per image" if self.min_accuracy is None
                else "--min-accuracy (mAP@.5)"}


def summary_table(report: dict) -> str:
    from pipeline.inference.parity_report import worst_client

    lines = [f"{'model':<18} {'mAP@.5':>8} {'mAP@[.5:.95]':>13} {'agreement':>10} {'drop pp':>8}"]
    reference = report["models"][report["reference"]]["map50"]
    for name, m in report["models"].items():
        lines.append(f"{name:<18} {m['map50']:8.4f} {m['map']:13.4f} {m['agreement']:10.4f} {(reference - m['map50']) * 100:8.2f}")
    for name, c in report.get("clients", {}).items():  # a report from before the clients has none
        label = f"int8 as {name}"
        if "refused" in c:
            lines.append(f"{label:<18} cannot feed the model: {c['refused']}")
        else:
            lines.append(f"{label:<18} {c['map50']:8.4f} {c['map']:13.4f} {c['agreement']:10.4f} {c['drop_pp']:8.2f}"
                         + ("  (gated)" if c["gated"] else ""))
    worst = worst_client(report.get("clients", {}), DETECT_WORST)
    if worst:
        lines.append(worst)
    g = report["gate"]
    lines.append(f"gate (mAP@.5 drop <= {g['max_drop_pp']:g} pp for {', '.join(g['applies_to'])}), floor {g['floor_rule']}: "
                 + ("PASSED" if g["passed"] else "FAILED: " + "; ".join(g["failures"])))
    return "\n".join(lines)


# A detector's tuning split has no client feeds: no remedy advice.
DETECT_WORST = ClientRows("map50", "mAP@.5", "pycoral,mediapipe,frigate", repairable=False)


def _exact(value: float):
    from pipeline.gate import Score

    return Score(Fraction(str(round(value, 6))), value)


def heldout_images(run) -> list:
    """The recorded held-out images, checked against the identities training recorded."""
    from pipeline.detection.heldout import recorded_heldout

    return recorded_heldout(run)


RECALL_POINTS = 101  # COCOeval's recall grid, 0 to 1 in steps of 0.01
THUMBNAILS = 8  # disagreeing images shown per model in the report
THUMBNAIL_SIDE = 192


def precision_recall_50(examples: Sequence, found: Sequence, labels: Sequence[str]) -> List[Optional[float]]:
    """Precision at each of COCOeval's 101 recall points at IoU 0.5, the mean over the classes present (None where
    no class reaches that recall): the curve whose area is mAP@.5, from COCOeval's own precision array."""
    import contextlib
    import io

    from pycocotools.cocoeval import COCOeval

    from pipeline.detection.evaluate import coco_ground_truth, coco_results

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


def disagreements(examples: Sequence, reference: Sequence, others: Dict[str, Sequence]) -> List[dict]:
    """Up to THUMBNAILS held-out images per model where it and the reference do not find the same objects (scoring
    >= AGREEMENT_SCORE, matched by IoU >= AGREEMENT_IOU and class, either way), drawn with both sets of boxes."""
    shown = []
    for name, found in others.items():
        count = 0
        for e, a, b in zip(examples, reference, found):
            missed, extra = _unmatched(a, b), _unmatched(b, a)
            if not (missed or extra):
                continue
            if count < THUMBNAILS:
                shown.append({"model": name, "id": e.id, "missed": missed, "extra": extra, "png": _thumbnail(e, a, b)})
            count += 1
    return shown


def _unmatched(a, b) -> int:
    """How many of a's detections scoring >= AGREEMENT_SCORE b does not find."""
    mine = [(box, c) for box, c, s in zip(b.boxes, b.classes, b.scores) if s >= AGREEMENT_SCORE]
    return sum(1 for box, c, s in zip(a.boxes, a.classes, a.scores)
               if s >= AGREEMENT_SCORE and not any(c == c2 and _iou(box, box2) >= AGREEMENT_IOU for box2, c2 in mine))


def _thumbnail(example, reference, other) -> str:
    """The image, its longer side THUMBNAIL_SIDE, the reference's boxes blue and the other model's red (drawn two
    pixels inside, so equal boxes both show), as base64 PNG."""
    import base64
    import io

    from PIL import Image, ImageDraw

    with Image.open(io.BytesIO(example.image)) as image:
        image = image.convert("RGB")
        scale = THUMBNAIL_SIDE / max(image.size)
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.BILINEAR)
    draw = ImageDraw.Draw(image)
    for found, colour, inset in ((reference, (21, 101, 192), 0), (other, (198, 40, 40), 2)):
        for box, s in zip(found.boxes, found.scores):
            if s < AGREEMENT_SCORE:
                continue
            ymin, xmin, ymax, xmax = (float(v) for v in box)
            draw.rectangle([xmin * image.width + inset, ymin * image.height + inset,
                            max(xmin * image.width + inset, xmax * image.width - inset),
                            max(ymin * image.height + inset, ymax * image.height - inset)], outline=colour, width=2)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def _device_results(path, run, examples: Sequence) -> dict:
    """The objects `edge evaluate` found on this run's bundle: from a model the bundle shipped, on its images, in order."""
    from edge.bundle import image_file
    from edge.integrity import sha256_bytes
    from edge.predictions import read_predictions
    from pipeline.detection.evaluate import Detections
    from pipeline.inference.bundle import DEVICE_MODELS

    results = read_predictions(path)
    if results.task != "detect":
        raise DataError(f"device results {path} hold a classifier's scores; expected `edge evaluate` of this detection run's "
                        "int8 model on its bundle (`pipeline parity RUN --bundle DIR`)")
    shipped = {run.entry(key)["sha256"]: key for key in DEVICE_MODELS if run.has(key)}
    model_key = shipped.get(results.model_sha256)
    if model_key is None:
        raise DataError(f"device results {path} come from a model (sha256 {str(results.model_sha256)[:12]}…) that is "
                        f"not this run's {' or '.join(DEVICE_MODELS)}; expected `edge evaluate` of a model from this run's bundle")
    if model_key != "model_int8":
        run.check_compiled_is_current(model_key)
    if len(results.predictions) != len(examples):
        raise DataError(f"device results {path} hold {len(results.predictions)} predictions, the held-out split has "
                        f"{len(examples)} images; expected `edge evaluate` on the bundle from `pipeline parity RUN --bundle DIR`")
    found = []
    for i, (p, e) in enumerate(zip(results.predictions, examples)):
        if p.id != e.id:
            raise DataError(f"device result {i} is for example {p.id!r}, held-out image {i} is {e.id!r}: "
                            "the device evaluated other images (or an older bundle)")
        expected = sha256_bytes(image_file(i, e.id, e.image)[1])
        if p.sha256 != expected:
            raise DataError(f"device result {i} ({e.id}) is for an image with sha256 {str(p.sha256)[:12]}…, this run's "
                            f"held-out image is {expected[:12]}…: the device evaluated other bytes; run `edge evaluate` on a new bundle")
        wrong = [o["id"] for o in p.objects if not 0 <= o["id"] < len(run.labels)]
        if wrong:
            raise DataError(f"device result {i} ({e.id}) has class id {wrong[0]}; expected one below {len(run.labels)}")
        found.append(Detections(np.array([o["box"] for o in p.objects], np.float32).reshape(-1, 4),
                                np.array([o["id"] for o in p.objects], np.int32),
                                np.array([o["score"] for o in p.objects], np.float32)))
    return {"file": str(path), "model": model_key, "backend": results.backend, "edgetpu": results.edgetpu, "detections": found}


def _savedmodel(run, pixels: Sequence[np.ndarray]) -> list:
    """The float Keras model's detections, post-processed as TFLite_Detection_PostProcess does."""
    import tensorflow as tf
    import tf_keras as keras

    from pipeline.detection.anchors import anchors, decode
    from pipeline.detection.evaluate import Detections
    from pipeline.detection.postprocess import Settings
    from pipeline.tasks.detect_export import recorded_anchor_spec

    from pipeline.detection import heads

    if heads.of_run(run) == heads.YOLO:
        from pipeline.detection.yolo_infer import float_detections

        return float_detections(keras.models.load_model(str(run.artifact("keras_model")), compile=False), pixels)
    settings = Settings()
    spec = recorded_anchor_spec(run)
    anchor_t = tf.constant(anchors(run.image_size, spec))
    model = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    found = []
    for image in pixels:
        out = model(tf.cast(image[None], tf.float32), training=False)
        boxes = tf.clip_by_value(decode(out["box_codes"], anchor_t)[0], 0.0, 1.0)
        scores = tf.sigmoid(out["class_logits"])[0, :, 1:]
        best, classes = tf.reduce_max(scores, -1), tf.argmax(scores, -1, output_type=tf.int32)
        keep = tf.image.non_max_suppression(boxes, best, settings.max_detections, settings.iou_threshold, settings.score_threshold)
        found.append(Detections(tf.gather(boxes, keep).numpy(), tf.gather(classes, keep).numpy(), tf.gather(best, keep).numpy()))
    return found


def agreement(reference: Sequence, other: Sequence):
    """(matched, total): the reference's detections scoring >= AGREEMENT_SCORE that `other` finds too."""
    matched = total = 0
    for a, b in zip(reference, other):
        mine = [(box, c) for box, c, s in zip(b.boxes, b.classes, b.scores) if s >= AGREEMENT_SCORE]
        for box, c, s in zip(a.boxes, a.classes, a.scores):
            if s < AGREEMENT_SCORE:
                continue
            total += 1
            matched += any(c == c2 and _iou(box, box2) >= AGREEMENT_IOU for box2, c2 in mine)
    return matched, total


def _iou(a, b) -> float:
    ih = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iw = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ih * iw
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
