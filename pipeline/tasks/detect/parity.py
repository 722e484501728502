"""A detector's side of `pipeline parity` (pipeline/tasks/comparison.py): the float SavedModel, the float TFLite model
(when exported) and the int8 model on the same held-out images through the same pixel contract, each scored by
COCOeval (pipeline/tasks/detect/scores.py: mAP@.5, mAP@[.5:.95], AP per class), their agreement with the float
model, the precision-recall curve at IoU 0.5 per model and the held-out images where int8 (or the device) and
float disagree, drawn for the report (detect_drawn.py); the gate limits the int8 model's mAP@.5 drop and holds
every model above a no-skill floor (detect_scores.NoSkill), or above --min-accuracy read as an mAP@.5 floor.

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

from typing import Dict, List, Sequence

import numpy as np

from pipeline.errors import ConfigError, DataError
from pipeline.gate import REFERENCE
from pipeline.tasks.comparison import Comparison, Held
from pipeline.tasks.detect.drawn import disagreements, summary_table
from pipeline.tasks.detect.scores import (
    AGREEMENT_IOU,
    AGREEMENT_SCORE,
    detections,
    gate_limits,
    gate_scores,
    metrics,
    no_skill,
    precision_recall_50,
    scored_entry,
)

GATED = ("int8_cpu",)


class DetectComparison(Comparison):
    name = "detect"
    metrics = metrics()
    floor_metric = "map50"

    def heldout(self, config, run) -> Held:
        from pipeline.tasks.detect.data.heldout import recorded_heldout

        if config.data is not None:
            raise ConfigError("--data applies to classification runs; a detection run's parity "
                              "compares its models on the recorded held-out images")
        examples = recorded_heldout(run)  # checked against the identities training recorded
        # Every model is fed the same pixels: the run's contract (raw pixels, stretched to the input).
        size = (run.image_size, run.image_size)
        pixels = [run.contract.load_pixels(e.image, size, name=e.id) for e in examples]
        return Held([e.id for e in examples], [e.image for e in examples], pixels, examples,
                    "run's recorded held-out split", run.labels)

    def reference(self, run, held: Held) -> list:
        return float_reference(run, held.pixels)

    def open(self, run, key: str, config):
        from edge.answers.detect import open_detector
        from pipeline.console import native_quiet

        with native_quiet():  # the interpreter's C++ start-up line is not the user's business
            return open_detector(run.artifact(key))

    def answers(self, opened, held: Held) -> list:
        return detections(opened, held.pixels, held.ids)

    def clients(self, opened, files: Sequence[bytes]):
        from pipeline.inference.client_scores import detect_clients

        return detect_clients(opened, files)

    def device_answers(self, checked, run, held: Held) -> list:
        """The objects `edge evaluate` found, each class id one of the run's."""
        from pipeline.tasks.detect.evaluate import Detections

        found = []
        for i, p in enumerate(checked.results.predictions):
            wrong = [o["id"] for o in p.objects if not 0 <= o["id"] < len(run.labels)]
            if wrong:
                raise DataError(f"device result {i} ({p.id}) has class id {wrong[0]}; expected one below {len(run.labels)}")
            found.append(Detections(np.array([o["box"] for o in p.objects], np.float32).reshape(-1, 4),
                                    np.array([o["id"] for o in p.objects], np.int32),
                                    np.array([o["score"] for o in p.objects], np.float32)))
        return found

    def entry(self, held: Held, found: list, reference: list) -> dict:
        return {**scored_entry(held.truth, found, reference, held.labels),
                "precision_at_recall_50": precision_recall_50(held.truth, found, held.labels)}

    def client_rows(self, held: Held, found, refused, entries, reference, named) -> Dict[str, dict]:
        """Each client's row, scored as a model is, with its mAP@.5 drop from the reference's; or why it cannot feed."""
        from pipeline.inference.client_scores import DETECT_CLIENTS

        clients = {}
        for name, client in DETECT_CLIENTS.items():
            head = {"feed": client.says, "gated": name in named}
            if name in refused:
                clients[name] = {**head, "refused": refused[name]}
                continue
            entry = scored_entry(held.truth, found[name], reference, held.labels)
            clients[name] = {**head, **entry, "drop_pp": (entries[REFERENCE]["map50"] - entry["map50"]) * 100}
        return clients

    def limits(self, limits):
        return gate_limits(limits)

    def gate_scores(self, entry: dict) -> dict:
        return gate_scores(entry)

    def chance(self, held: Held):
        return no_skill(held.truth, held.labels)

    def report(self, config, run, held: Held, entries, clients, device, verdict, answers) -> dict:
        if device is not None:
            entries[next(name for name in answers if name in ("edgetpu", "device_cpu"))]["device"] = device
        shown = [name for name in answers if name not in (REFERENCE, "float_tflite_cpu")]
        examples = held.truth
        return {"task": "detect", "reference": REFERENCE, "models": entries, "clients": clients, "gate": verdict,
                "images": len(examples),
                "objects": int(sum(len(e.boxes) for e in examples)),
                "disagreements": disagreements(examples, answers[REFERENCE], {n: answers[n] for n in shown}),
                "agreement": {"score_at_least": AGREEMENT_SCORE, "iou_at_least": AGREEMENT_IOU, "same_class": True}}

    def write(self, run, report: dict, answers, held: Held, failures: List[str]):
        from pipeline.rundir.files import json_bytes

        models, clients = report["models"], report["clients"]
        with run.transaction() as t:
            t.write("parity_report", json_bytes(report))
            t.set("parity", {**{name: {k: m[k] for k in ("map", "map50", "agreement")} for name, m in models.items()},
                             "clients": {name: ({"refused": c["refused"]} if "refused" in c else
                                                {k: c[k] for k in ("map", "map50", "agreement", "drop_pp")}) | {"gated": c["gated"]}
                                         for name, c in clients.items()},
                             "passed": not failures, "failures": failures})
        return run.dir / "parity"

    def summary(self, report: dict) -> str:
        return summary_table(report)


def float_reference(run, pixels: Sequence[np.ndarray]) -> list:
    """The float detector's detections that parity and the remedy ladder judge by: a trained run's Keras model, or
    an imported detector as given, with its own decoding (pipeline/importing)."""
    if run.origin:
        from pipeline.importing import reference

        return reference.detections(run.dir, run.origin, pixels)
    return _savedmodel(run, pixels)


def _savedmodel(run, pixels: Sequence[np.ndarray]) -> list:
    """The float Keras model's detections, post-processed as TFLite_Detection_PostProcess does."""
    import tensorflow as tf
    import tf_keras as keras

    from pipeline.tasks.detect.heads.ssd.anchors import anchors, decode
    from pipeline.tasks.detect.evaluate import Detections
    from pipeline.tasks.detect.heads.ssd.postprocess import Settings
    from pipeline.tasks.detect.export import recorded_anchor_spec

    from pipeline.tasks.detect import heads

    if heads.of_run(run) == heads.YOLO:
        from pipeline.tasks.detect.heads.yolo.infer import float_detections

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
