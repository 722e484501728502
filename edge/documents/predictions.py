"""The predictions document: what a device answered on each image, from `edge evaluate` back to the host.

    edge evaluate MODEL --data BUNDLE --out predictions.json          (writes it: `predictions_document`)
    pipeline parity RUN --device-results predictions.json             (reads it: `read_predictions`)

    {"schema_version": 1, "model": "<file name>", "model_sha256": "<hex>", "backend": "...", "edgetpu": bool,
     "labels": [...] | null,
     "predictions": [{"file": "<path in the data folder>", "id": ..., "label": ..., "sha256": ..., "scores": [...]}, ...],
     "top1_accuracy": ..., "top_k": k, "top_k_accuracy": ..., "classes": <edge.answers.metrics.class_report> | null,
     "errors": [{"file", "id", "error"}, ...]   (only when some images could not be read)}

A detector's document (`edge evaluate` of a model ending in the post-processing op) says "task": "detect" and
each prediction holds "objects" in place of "scores": every detection the op kept, whatever its score, as
{"id": class id, "score": s, "box": [ymin, xmin, ymax, xmax] normalized to the image}; the accuracy fields are
null (mAP needs the ground truth, which is the host's). A document with no "task" is a classifier's. A classifier's
is written indented; a detector's, which holds every detection, as compact JSON on one line (`write_detections`),
its entries possibly written already, each on the worker that read its image (`encoded_detection`).

A pose model's document says "task": "pose": a detector's, each object with "keypoints" too, one [x, y, score] per
keypoint, x and y normalized to the image as the box is (clipped to it), the score the keypoint's own (what
`pipeline parity RUN --device-results` of a pose run reads: pipeline/tasks/pose/parity.py).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np

from edge.files.atomic import write_bytes_atomic
from edge.files.documents import load
from edge.errors import InputError

SCHEMA_VERSION = 1
COMPACT = (",", ":")  # json separators of a detector's document
_EXPECTED = "the JSON written by `edge evaluate`"


TASKS = ("classify", "detect", "pose")
OBJECTS = ("detect", "pose")  # the tasks whose predictions hold objects


class Prediction(NamedTuple):
    file: Optional[str]  # the image's path in the data folder
    id: Optional[str]  # the example's identity (a bundle's images carry it)
    label: Optional[int]
    sha256: Optional[str]  # of the image's bytes (None from an edgeflow that recorded none)
    scores: List[float]  # one per class; empty for a detector
    objects: Optional[List[Dict[str, Any]]] = None  # a detector's: {"id", "score", "box": [ymin, xmin, ymax, xmax]}
    # (a pose model's with "keypoints": [[x, y, score], ...])


class Predictions(NamedTuple):
    path: Path
    model_sha256: Optional[str]  # the model that answered
    backend: Optional[str]  # the interpreter that ran it
    edgetpu: bool
    predictions: List[Prediction]  # in the order the device scored the images
    task: str = "classify"  # "detect": each prediction holds objects


def prediction(file: str, example_id: Optional[str], label: Optional[int], sha256: Optional[str], scores: Any) -> Dict[str, Any]:
    """One entry of the predictions list: the image, its identity and label, all its scores (a numpy array)."""
    return {"file": file, "id": example_id, "label": label, "sha256": sha256, "scores": scores.tolist()}


def detection(file: str, example_id: Optional[str], sha256: Optional[str], ids: Any, scores: Any, boxes: Any,
              keypoints: Any = None) -> Dict[str, Any]:
    """One entry of a detector's predictions list: the image, its identity, every object from arrays of class ids
    [K], scores [K] and boxes [K, 4] (ymin, xmin, ymax, xmax normalized to the image; edge.answers.detect.kept), and a
    pose model's keypoints [K, P, 3] (x, y normalized to the image, score), each number rounded to 6 decimals."""
    # Whole arrays rounded at once. For float32 values this is exactly Python's round(float(v), 6): v * 1e6 needs
    # at most 38 bits, so it is exact in float64, and rint then decides halves on the exact value, to even.
    scores = np.round(np.asarray(scores, np.float64), 6).tolist()
    boxes = np.round(np.asarray(boxes, np.float64).reshape(-1, 4), 6).tolist()
    objects = [{"id": i, "score": s, "box": b} for i, s, b in zip(np.asarray(ids).tolist(), scores, boxes)]
    if keypoints is not None:
        points = np.round(np.asarray(keypoints, np.float64), 6).tolist()
        if len(points) != len(objects):
            raise ValueError(f"{len(points)} objects' keypoints for {len(objects)} objects")  # internal invariant
        for o, p in zip(objects, points):
            o["keypoints"] = p
    return {"file": file, "id": example_id, "label": None, "sha256": sha256, "objects": objects}


class Encoded(NamedTuple):
    """A detector's entry already written as the compact JSON `write_detections` gives it, and its object count."""

    text: str
    objects: int


def encoded_detection(file: str, example_id: Optional[str], sha256: Optional[str], ids: Any, scores: Any, boxes: Any,
                      keypoints: Any = None) -> Encoded:
    """`detection` written as compact JSON at once: a worker thread can do it beside the invokes, and the entry lives on
    as one string instead of a dict per object (which the end's encoding and the garbage collector would walk)."""
    entry = detection(file, example_id, sha256, ids, scores, boxes, keypoints)
    return Encoded(json.dumps(entry, separators=COMPACT), len(entry["objects"]))


def predictions_document(model_name: str, model_sha256: str, backend: str, edgetpu: bool, labels: Optional[List[str]],
                         predictions: List[Dict[str, Any]], top1: Optional[float], k: int, top_k: Optional[float],
                         classes: Optional[Dict[str, Any]], errors: List[Dict[str, Any]], task: str = "classify") -> Dict[str, Any]:
    """The whole document: the model (name, sha256, interpreter), every prediction, the accuracy, and the images left
    out, each with why (parity refuses a short list, naming the count)."""
    result = {
        "schema_version": SCHEMA_VERSION,
        "model": model_name,
        "model_sha256": model_sha256,
        "backend": backend,
        "edgetpu": edgetpu,
        **({"task": task} if task != "classify" else {}),
        "labels": labels,
        "predictions": predictions,
        "top1_accuracy": top1,
        "top_k": k,
        "top_k_accuracy": top_k,
        "classes": classes,
    }
    if errors:
        result["errors"] = errors
    return result


def write_detections(path: Path, document: Dict[str, Any]) -> Path:
    """Write a detector's document to `path` atomically (edge.files.atomic) as compact JSON on one line, UTF-8, with a final
    newline. It holds every detection at threshold 0, tens per image: json's C encoder (which indenting turns off)
    writes it in a quarter of the time, at half the size. Entries already `Encoded` go in as written: the same bytes
    as json.dumps of the whole document with the entries as dicts."""
    return write_bytes_atomic(Path(path), (detections_json(document) + "\n").encode("utf-8"))


def detections_json(document: Dict[str, Any]) -> str:
    """json.dumps(document, separators=COMPACT), with `Encoded` predictions spliced in as they are."""
    def value(key: str, item: Any) -> str:
        if key != "predictions":
            return json.dumps(item, separators=COMPACT)
        return "[" + ",".join(e.text if isinstance(e, Encoded) else json.dumps(e, separators=COMPACT) for e in item) + "]"

    return "{" + ",".join(json.dumps(k) + ":" + value(k, v) for k, v in document.items()) + "}"


def read_predictions(path: Path) -> Predictions:
    """The document at `path`, checked: its version, and the form of each prediction (what they are of is the reader's)."""
    path = Path(path)
    document = load(path, "device results", SCHEMA_VERSION, InputError, _EXPECTED)
    entries = document.get("predictions")
    if not isinstance(entries, list):
        raise InputError(f"device results {path} hold no list of predictions (got {_brief(entries)}); expected {_EXPECTED}")
    task = document.get("task", "classify")
    if task not in TASKS:
        raise InputError(f"device results {path} are for task {_brief(task)}; expected one of {', '.join(TASKS)}")
    predictions = []
    for i, p in enumerate(entries):
        if not isinstance(p, dict):
            raise InputError(f"device result {i} in {path} is {_brief(p)}, expected an object with file, id, label, sha256 and "
                             + ("objects" if task in OBJECTS else "scores"))
        if task in OBJECTS:
            predictions.append(Prediction(p.get("file"), p.get("id"), p.get("label"), p.get("sha256"), [],
                                          _objects(p, i, path, task == "pose")))
            continue
        scores = p.get("scores")
        if not isinstance(scores, list) or not all(_number(s) for s in scores):
            raise InputError(f"device result {i} ({p.get('id')}) in {path} has scores {_brief(scores)}, expected a list of numbers (finite: no NaN or Infinity)")
        predictions.append(Prediction(p.get("file"), p.get("id"), p.get("label"), p.get("sha256"), scores))
    model_sha256 = document.get("model_sha256")
    return Predictions(path, model_sha256 if isinstance(model_sha256, str) else None, document.get("backend"),
                       bool(document.get("edgetpu")), predictions, task)


def _objects(p: Dict[str, Any], i: int, path: Path, pose: bool = False) -> List[Dict[str, Any]]:
    objects = p.get("objects")
    expected = ('expected a list of {"id": class id, "score": finite number, "box": [ymin, xmin, ymax, xmax]'
                + (', "keypoints": [[x, y, score], ...]}' if pose else "}"))
    if not isinstance(objects, list):
        raise InputError(f"device result {i} ({p.get('id')}) in {path} has objects {_brief(objects)}, {expected}")
    for o in objects:
        box = o.get("box") if isinstance(o, dict) else None
        if (not isinstance(o, dict) or not isinstance(o.get("id"), int) or isinstance(o.get("id"), bool)
                or not _number(o.get("score")) or not isinstance(box, list) or len(box) != 4 or not all(_number(v) for v in box)):
            raise InputError(f"device result {i} ({p.get('id')}) in {path} has an object {_brief(o)}, {expected}")
        # How many keypoints is the run's to check (its layout); their form is the document's.
        if pose and not _triples(o.get("keypoints")):
            raise InputError(f"device result {i} ({p.get('id')}) in {path} has an object with keypoints "
                             f"{_brief(o.get('keypoints'))}, {expected}")
    return objects


def _triples(points: Any) -> bool:
    """A non-empty list of [x, y, score] of finite numbers."""
    return (isinstance(points, list) and bool(points)
            and all(isinstance(t, list) and len(t) == 3 and all(_number(v) for v in t) for t in points))


def _number(value: Any) -> bool:
    """A finite number: a device's NaN or Infinity (JSON's NaN/Infinity constants) is refused, never scored or
    written into a report as NaN."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
