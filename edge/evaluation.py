"""What `edge evaluate` does beside scoring: list the labelled images of a data folder, count accuracy, and
build the predictions document that `pipeline parity --device-results` reads.

    samples, labels = list_samples(Path("bundle"), runner.labels)     # bundle.json, or class sub-folders
    tally = Tally(k=5)
    tally.add(sample.label, scores)

A data folder is either an evaluation bundle (a folder with bundle.json, written by `pipeline parity
--bundle`: {"labels": [...], "images": [{"file", "label", "id"}, ...]}) or one sub-folder of images per
class (the model's labels decide the class ids; without labels, the sorted folder names do).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from edge.classify import top_k
from edge.errors import InputError
from edge.image_files import is_image_file
from edge.integrity import load_record, sha256_bytes
from edge.metrics import class_report

BUNDLE_NAME = "bundle.json"
SCHEMA_VERSION = 1  # of the predictions document


class Sample(NamedTuple):
    path: Path  # the image file
    rel: str  # its path relative to the data directory, as written to predictions
    label: Optional[int]  # class index, None when unknown
    id: Optional[str] = None  # the example's identity in the run's data (bundles carry it), for parity to match
    sha256: Optional[str] = None  # the bundle's record of the file's bytes, checked before scoring; parity checks it again


def data_folder(data: Path) -> Path:
    """`data` when it is a folder (checked before a model is loaded); InputError otherwise."""
    if not data.is_dir():
        raise InputError(f"--data {data} is not a directory, expected class folders or an evaluation bundle")
    return data


def list_samples(data: Path, labels: Optional[List[str]]) -> Tuple[List[Sample], Optional[List[str]]]:
    """(the samples of a bundle or of class folders, the labels they are counted against)."""
    data = data_folder(data)
    return (_bundle_samples if (data / BUNDLE_NAME).is_file() else _folder_samples)(data, labels)


def check_labels(labels: Optional[List[str]], num_classes: int) -> None:
    """One label per score, checked once before any image is scored."""
    if labels is not None and len(labels) != num_classes:
        raise InputError(f"model gives {num_classes} scores, expected {len(labels)} (one per label)")


def _folder_samples(data: Path, labels: Optional[List[str]]) -> Tuple[List[Sample], List[str]]:
    classes = sorted(p.name for p in data.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise InputError(f"{data} has neither {BUNDLE_NAME} nor class sub-folders, expected one of them")
    if labels is None:
        labels = classes
    unknown = [c for c in classes if c not in labels]
    if unknown:
        raise InputError(f"folders {unknown} in {data} are not among the model's labels {labels}")
    samples = []
    for name in classes:
        for f in sorted((data / name).iterdir()):
            if is_image_file(f):
                samples.append(Sample(f, f.relative_to(data).as_posix(), labels.index(name)))
    return samples, labels


def _bundle_samples(data: Path, labels: Optional[List[str]]) -> Tuple[List[Sample], Optional[List[str]]]:
    path = data / BUNDLE_NAME
    bundle = load_record(path, "evaluation bundle", InputError)
    bundle_labels = [str(x) for x in bundle.get("labels") or []]
    if labels is not None and bundle_labels and labels != bundle_labels:
        raise InputError(f"{path} labels {bundle_labels} differ from the model's labels {labels}; expected the same classes in the same order")
    labels = labels if labels is not None else bundle_labels or None
    samples = []
    for i, entry in enumerate(bundle.get("images") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise InputError(f"{path} images[{i}] is {entry!r}, expected {{\"file\": ..., \"label\": ...}}")
        label = entry.get("label")
        if label is not None and not (isinstance(label, int) and (labels is None or 0 <= label < len(labels))):
            raise InputError(f"{path} images[{i}] has label {label!r}, expected a class index below {len(labels or [])} or null")
        samples.append(Sample(data / entry["file"], entry["file"], label, entry.get("id"), _checked_sha256(data, entry, path)))
    if not samples:
        raise InputError(f"{path} lists no images")
    return samples, labels


def _checked_sha256(data: Path, entry: Dict[str, Any], bundle: Path) -> Optional[str]:
    """The bundled file's sha256 when it is the one bundle.json records; a file that changed is refused. A missing
    file is left to the scoring, which names it with the other unreadable images."""
    recorded, path = entry.get("sha256"), data / entry["file"]
    if not path.is_file():
        return recorded
    actual = sha256_bytes(path.read_bytes())
    if recorded is not None and actual != recorded:
        raise InputError(f"{path} has sha256 {actual[:12]}…, {bundle} records {str(recorded)[:12]}…: the bundle changed after "
                         "`pipeline parity --bundle` wrote it; write a new bundle")
    return actual


class Tally:
    """Top-1 and top-k accuracy over the labelled images; unlabelled ones are scored but not counted."""

    def __init__(self, k: int = 1):
        self.k = k
        self.labelled = self.correct = self.correct_k = 0
        self.truth: List[int] = []  # labelled images' true and top-1 classes, for per-class precision, recall and F1
        self.answered: List[int] = []

    def add(self, label: Optional[int], scores: np.ndarray) -> None:
        if label is None:
            return
        best = [c.id for c in top_k(scores, k=self.k)]
        self.labelled += 1
        self.correct += int(best[0] == label)
        self.correct_k += int(label in best)
        self.truth.append(label)
        self.answered.append(best[0])

    def classes(self, num_classes: int) -> Optional[Dict[str, Any]]:
        """Precision, recall, F1 and support per class id and macro-F1 (edge/metrics.py: scikit-learn's definitions)."""
        return class_report(self.truth, self.answered, num_classes) if self.labelled else None

    @property
    def top1(self) -> Optional[float]:
        return self.correct / self.labelled if self.labelled else None

    @property
    def top_k(self) -> Optional[float]:
        return self.correct_k / self.labelled if self.labelled else None

    def summary(self) -> str:
        if not self.labelled:
            return "top-1 accuracy n/a (no labels)"
        macro_f1 = class_report(self.truth, self.answered, max(self.truth + self.answered) + 1)["macro_f1"]
        return (f"top-1 accuracy {self.top1:.4f}" + (f", top-{self.k} {self.top_k:.4f}" if self.k > 1 else "")
                + f", macro-F1 {macro_f1:.4f}")


def prediction(sample: Sample, scores: np.ndarray) -> Dict[str, Any]:
    """One entry of the predictions list: the image, its identity and label, all its scores."""
    return {"file": sample.rel, "id": sample.id, "label": sample.label, "sha256": sample.sha256, "scores": scores.tolist()}


def predictions_document(model: Path, runner: Any, labels: Optional[List[str]], predictions: List[Dict[str, Any]],
                         tally: Tally, errors: List[Dict[str, Any]]) -> Dict[str, Any]:
    """What `edge evaluate --out` writes: the model (name, sha256, interpreter), every prediction, the accuracy,
    and the images left out, each with why (parity refuses a short list, naming the count)."""
    result = {
        "schema_version": SCHEMA_VERSION,
        "model": model.name,
        "model_sha256": runner.sha256,
        "backend": runner.loaded.backend,
        "edgetpu": runner.loaded.edgetpu,
        "labels": labels,
        "predictions": predictions,
        "top1_accuracy": tally.top1,
        "top_k": tally.k,
        "top_k_accuracy": tally.top_k,
        "classes": tally.classes(runner.num_classes),
    }
    if errors:
        result["errors"] = errors
    return result
