"""A detector's side of `pipeline parity` (pipeline/tasks/comparison.py): the float SavedModel, the float TFLite model
(when exported) and the int8 model on the same held-out images (the recorded split, or those of --data SPEC: any form
`pipeline train --data` takes, refused when the run trained or tuned on one of them; data/heldout.py) through the same
pixel contract, each scored by COCOeval (pipeline/tasks/detect/scores.py: mAP@.5, mAP@[.5:.95], AP per class), their
agreement with the float model, the precision-recall curve at IoU 0.5 per model and the held-out images where int8 (or
the device) and float disagree, drawn for the report (drawn.py); the gate limits the int8 model's mAP@.5 drop and
holds every model above a no-skill floor (scores.NoSkill), or above --min-accuracy read as an mAP@.5 floor.

The float model's boxes go through what the exported file's decoding does (the run's head's `reference`: for the SSD
head what TFLite_Detection_PostProcess does, for the anchor-free head the device's host decoding), so the comparison
is of the models, not of two post-processing recipes. Agreement: the share of the float model's detections scoring at
least 0.4 (the clients' threshold) that the other model matches with IoU >= 0.5 and the same class.

Each known detector client (pipeline/tasks/detect/clients.py CLIENTS: edgeflow's contract, pycoral's
detect_image.py letterbox, MediaPipe's ObjectDetector, Frigate's square region) gets a row of its own: the int8
model on the int8 row's interpreter, fed each held-out file as that client feeds it, its boxes mapped back to the
picture as that client maps them, scored as the int8 row is. The rows are reported; --clients pycoral,frigate
gates the named ones' mAP@.5 drop like the int8 model's.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from pipeline.errors import DataError
from pipeline.gate import REFERENCE
from pipeline.tasks.comparison import Comparison, Held
from pipeline.tasks.detect.drawn import disagreements, summary_table
from pipeline.tasks.detect.report import heldout_line
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
    holds = "a detector's objects"
    metrics = metrics()
    floor_metric = "map50"

    def heldout(self, config, run) -> Held:
        """The recorded held-out images, checked against the identities training recorded; or those of --data, checked
        to hold the run's classes and no image it trained or tuned on (data/heldout.py)."""
        from pipeline.tasks.detect.data.heldout import given_heldout, recorded_heldout

        held, self.heldout_record = heldout_images(run, config.data, given_heldout, recorded_heldout)
        return held

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
        from pipeline.tasks.detect.clients import detect_clients

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
        from pipeline.tasks.detect.clients import CLIENTS

        clients = {}
        for name, client in CLIENTS.items():
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
        objects = int(sum(len(e.boxes) for e in examples))
        from pipeline.importing import reference

        return {"task": "detect", "reference": REFERENCE, "models": entries, "clients": clients, "gate": verdict,
                # An imported detector's reference row is the original as given (heads/<head>/reference.py), named here.
                **({"reference_model": reference.describe(run.origin)} if run.origin else {}),
                "heldout": {**self.heldout_record, "images": len(examples), "objects": objects},
                "images": len(examples), "objects": objects,
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
                             "heldout": report["heldout"]["source"], "passed": not failures, "failures": failures})
        return run.dir / "parity"

    def summary(self, report: dict) -> str:
        return f"{heldout_line(report)}\n{summary_table(report)}"


def heldout_images(run, data: Optional[str], given_heldout: Callable, recorded_heldout: Callable) -> Tuple[Held, dict]:
    """(parity's held-out images, report.json's "heldout") of `data` (--data) read and checked by `given_heldout(run,
    data)` -> (examples, record), or with no --data, the run's recorded split by `recorded_heldout(run)`: a task's own
    readers (data/heldout.py, detect's or a task's built on it)."""
    from pipeline.tasks.detect.data.heldout import RECORDED

    if data is not None:
        examples, record = given_heldout(run, data)
    else:
        examples = recorded_heldout(run)
        record = {"source": RECORDED, "resolved": run.data.val_spec or run.data.train_spec}
    return held_images(run, examples, record["source"]), record


def held_images(run, examples: Sequence, source: str) -> Held:
    """Parity's held-out images of detection examples (or a task's built on them): every model is fed the same pixels,
    the run's contract's (raw pixels, stretched to the input)."""
    size = (run.image_size, run.image_size)
    pixels = [run.contract.load_pixels(e.image, size, name=e.id) for e in examples]
    return Held([e.id for e in examples], [e.image for e in examples], pixels, examples, source, run.labels)


def float_reference(run, pixels: Sequence[np.ndarray]) -> list:
    """The float detector's detections that parity and the remedy ladder judge by: the run's head reads its float model
    (a trained run's Keras model, or an imported detector as given) as the exported file is read (heads/<head>/)."""
    from pipeline.tasks.detect import heads

    return heads.of_run(run).reference(run, pixels)
