"""`pipeline parity` of a detection run: the float SavedModel, the float TFLite model and the int8 model on the same
held-out images through the same pixel contract, each scored by COCOeval (mAP@.5, mAP@[.5:.95], AP per class),
and their agreement with the float model; the gate limits the int8 model's mAP@.5 drop (pipeline/gate.py).

The float SavedModel's boxes go through what TFLite_Detection_PostProcess does (decode against the anchors, one
class per box, class-agnostic non-maximum suppression, the op's thresholds), so the comparison is of the
models, not of two post-processing recipes. Agreement: the share of the float model's detections scoring at
least 0.4 (the clients' threshold) that the other model matches with IoU >= 0.5 and the same class.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from fractions import Fraction
from typing import Dict, List, NamedTuple, Sequence

import numpy as np

from pipeline.errors import ConfigError, DataError, ManifestError

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
    from edge.detect import detect_pixels, open_detector
    from pipeline import gate
    from pipeline.detection.evaluate import Detections, evaluate
    from pipeline.rundir.files import json_bytes

    if config.data is not None or config.device_results is not None or config.clients:
        raise ConfigError("--data, --device-results and --clients apply to classification runs; a detection run's parity "
                          "compares its models on the recorded held-out images")
    missing = [key for key in MODELS.values() if not run.has(key)]
    if missing:
        raise ConfigError(f"{run.dir} has no {' or '.join(missing)}; run `pipeline export RUN` and `pipeline export RUN --int8` first")
    examples = _heldout(run)
    labels = run.labels
    opened = {name: open_detector(run.artifact(key)) for name, key in MODELS.items()}
    # Every model is fed the same pixels: the float TFLite model's contract (raw pixels, stretched to the input).
    pixels = [opened["float_tflite_cpu"].runner.pixels(e.image, e.id) for e in examples]
    predictions = {REFERENCE: _savedmodel(run, pixels)}
    for name, detector in opened.items():
        found = []
        for p, e in zip(pixels, examples):
            objects = detect_pixels(detector, p, (1, 1), threshold=0.0, what=e.id)
            found.append(Detections(np.array([[o.box.ymin, o.box.xmin, o.box.ymax, o.box.xmax] for o in objects], np.float32).reshape(-1, 4),
                                    np.array([o.id for o in objects], np.int32), np.array([o.score for o in objects], np.float32)))
        predictions[name] = found
    models: Dict[str, dict] = {}
    for name, found in predictions.items():
        scores = evaluate(examples, found, labels)
        matched, total = _agreement(predictions[REFERENCE], found)
        models[name] = {"map": scores.map, "map50": scores.map50, "per_class": scores.as_dict()["per_class"],
                        "agreement": matched / total if total else 1.0, "agree": matched, "detections": total,
                        "images": len(examples)}
    scored = {name: {"map50": _exact(m["map50"]), "map": _exact(m["map"]),
                     gate.AGREEMENT: gate.Score.counted(m["agree"], m["detections"], "detections") if m["detections"]
                     else gate.Score(Fraction(1), 1.0)}
              for name, m in models.items()}
    # Agreement is gated only when --min-agreement is given: classification's default (0.98 of images) is not a
    # limit for detections.
    given = config.min_agreement if config.min_agreement != gate.GATE.min_agreement else 0.0
    limits = gate.GateLimits(config.max_drop, given, "map50")
    failures = []
    if models[REFERENCE]["map50"] <= 0:
        failures.append(f"{REFERENCE}: mAP@.5 0 on the held-out images, no better than finding nothing")
    failures += gate.check(scored, limits, metrics(), None, reference=REFERENCE, gated=GATED)
    verdict = gate.record(limits, None, list(models), failures, GATED)
    report = {"task": "detect", "reference": REFERENCE, "models": models, "gate": verdict, "images": len(examples),
              "objects": int(sum(len(e.boxes) for e in examples)),
              "agreement": {"score_at_least": AGREEMENT_SCORE, "iou_at_least": AGREEMENT_IOU, "same_class": True}}
    report_dir = run.dir / "parity"
    with run.transaction() as t:
        t.write("parity_report", json_bytes(report))
        t.set("parity", {**{name: {k: m[k] for k in ("map", "map50", "agreement")} for name, m in models.items()},
                         "passed": not failures, "failures": failures})
    return Outcome(report_dir, report, failures)


def summary_table(report: dict) -> str:
    lines = [f"{'model':<18} {'mAP@.5':>8} {'mAP@[.5:.95]':>13} {'agreement':>10}"]
    for name, m in report["models"].items():
        lines.append(f"{name:<18} {m['map50']:8.4f} {m['map']:13.4f} {m['agreement']:10.4f}")
    g = report["gate"]
    lines.append(f"gate (mAP@.5 drop <= {g['max_drop_pp']:g} pp for {', '.join(g['applies_to'])}): "
                 + ("PASSED" if g["passed"] else "FAILED: " + "; ".join(g["failures"])))
    return "\n".join(lines)


def _exact(value: float):
    from pipeline.gate import Score

    return Score(Fraction(str(round(value, 6))), value)


def _heldout(run) -> list:
    """The recorded held-out images, checked against the identities training recorded."""
    from pipeline.data.identity import recorded_split
    from pipeline.detection.specs import open_detection

    recorded = ((run.data.identity or {}).get("heldout") or {}).get("examples")
    if recorded is None:
        raise ManifestError(f"{run.dir}'s manifest records no held-out images (data.identity.heldout.examples); "
                            "expected the manifest written by `pipeline train --task detect`")
    if run.data.val_spec:
        examples = open_detection(run.data.val_spec, run.labels).examples
    else:
        source = open_detection(run.data.train_spec)
        examples = [source.examples[i] for i in source.indices("heldout", recorded_split(run))]
    got = [[e.id, e.digest] for e in examples]
    if got != recorded:
        changed = next((r[0] for r, g in zip(recorded, got) if r != g), None) or f"{len(got)} images, {len(recorded)} recorded"
        raise DataError(f"the held-out images are not the ones training recorded ({changed}); expected the same data")
    return examples


def _savedmodel(run, pixels: Sequence[np.ndarray]) -> list:
    """The float Keras model's detections, post-processed as TFLite_Detection_PostProcess does."""
    import tensorflow as tf
    import tf_keras as keras

    from pipeline.detection.anchors import anchors, decode
    from pipeline.detection.evaluate import Detections
    from pipeline.detection.postprocess import Settings
    from pipeline.tasks.detect_export import recorded_anchor_spec

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


def _agreement(reference: Sequence, other: Sequence):
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
