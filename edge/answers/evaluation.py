"""What `edge evaluate` does beside scoring: list the labelled images of a data folder, count accuracy, and
fill the predictions document that `pipeline parity --device-results` reads (edge/documents/predictions.py).

    samples, labels = list_samples(Path("bundle"), runner.labels)     # bundle.json, or class sub-folders
    tally = Tally(k=5)
    tally.add(sample.label, scores)

A data folder is either an evaluation bundle (a folder with bundle.json, written by `pipeline parity
--bundle`; edge/documents/bundle.py) or one sub-folder of images per class (the model's labels decide the class
ids; without labels, the sorted folder names do). A detector (`detect_folder`, `evaluate_detections`) takes
a bundle or any folder of images, and writes every image's objects; mAP is the host's, against its boxes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from edge.documents import predictions as predictions_doc
from edge.documents.bundle import BUNDLE_NAME, is_bundle, read_bundle, verified_bytes
from edge.answers.classify import top_k
from edge.errors import InputError
from edge.pixels.image_files import is_image_file
from edge.answers.metrics import class_report


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
    return (_bundle_samples if is_bundle(data) else _folder_samples)(data, labels)


def check_labels(labels: Optional[List[str]], num_classes: int) -> None:
    """One label per score, checked once before any image is scored."""
    if labels is not None and len(labels) != num_classes:
        raise InputError(f"model gives {num_classes} scores, expected {len(labels)} (one per label)")


def detection_samples(data: Path, labels: Optional[List[str]]) -> Tuple[List[Sample], Optional[List[str]]]:
    """(a bundle's images, or every image under `data`, the labels): a detector's evaluation needs no classes."""
    from edge.pixels.image_files import images_under

    data = data_folder(data)
    if is_bundle(data):
        return _bundle_samples(data, labels)
    return [Sample(f, f.relative_to(data).as_posix(), None) for f in images_under(data, "--data")], labels


def source_of(sample: Sample) -> Union[Path, bytes]:
    """What to decode for `sample`: a bundled image's bytes, checked against the sha256 the results will carry (the
    bytes hashed are the bytes decoded); a folder's image by its path."""
    return verified_bytes(sample.path, sample.sha256) if sample.sha256 is not None else sample.path


def evaluate_detections(detector: Any, samples: List[Sample], progress: Any = None, workers: Optional[int] = None,
                        post_on_workers: bool = False, read: Optional[Callable[[Any], Any]] = None,
                        decode: Optional[Callable[[Any], Any]] = None,
                        encoded: bool = False) -> Tuple[List[Any], List[Dict[str, Any]]]:
    """(one predictions entry per image read, one error entry per image not): every object kept, boxes normalized to
    the image. Images are decoded on `workers` threads (None: the default for its interpreter, edge.files.workers) while
    this thread sets the input, invokes and `read`s the outputs (copies: the next invoke overwrites the
    interpreter's); `decode` turns them into (class ids, scores, boxes) arrays here right after, or on the workers with `post_on_workers` (worth it when decoding costs
    more than a hand-over to a thread, as a decode + NMS in numpy does). The defaults read the SSD post-processing
    op's four outputs (or an anchor-free head's two, decoded by edge.answers.heads.yolo; a pose model's three, by
    edge.answers.heads.keypoints, each object with its keypoints) and keep every detection (threshold 0). With `encoded`, each entry comes written as JSON
    (edge.documents.predictions.Encoded, for write_detections) where `post` runs. `progress` wraps the iteration, or None."""
    from edge.answers import detect as det
    from edge.answers.classify import invoke
    from edge.files.prefetch import pipelined

    runner = detector.runner
    # Only copies after the invoke; an anchor-free head's decode + NMS happens in `decode`, on the workers when asked.
    read = read or (lambda d: det.read_outputs(d.runner.interpreter, d.indices))
    # Threshold 0: every detection the op kept, each box normalized to the image (the stretch maps the whole image onto the input).
    decode = decode or (lambda outputs: kept_objects(det.raw_of(outputs, detector.indices), 0.0))

    def load(sample: Sample):
        return runner.pixels(source_of(sample), str(sample.path))

    def run(sample: Sample, pixels):
        runner.feed(pixels)
        invoke(runner.interpreter, str(sample.path))
        return read(detector)

    make_entry = predictions_doc.encoded_detection if encoded else predictions_doc.detection

    def post(sample: Sample, outputs):
        return make_entry(sample.rel, sample.id, sample.sha256, *decode(outputs))

    entries, errors = [], []
    done = pipelined(samples, load, run, post, workers=runner.workers(workers), post_on_workers=post_on_workers)
    for sample, entry, error in (progress(done) if progress is not None else done):
        if error is not None:
            errors.append({"file": sample.rel, "id": sample.id, "error": str(error)})
            continue
        entries.append(entry)
    return entries, errors


def kept_objects(raw: Any, threshold: float = 0.0) -> Tuple[np.ndarray, ...]:
    """(class ids, scores, boxes) of the detections scoring at least `threshold` (edge.answers.detect.kept), and for a
    pose model their keypoints [n, K, 3] after them: x and y normalized to the image and clipped to it, as the boxes
    are (and as `edge detect` clips them), then each keypoint's score."""
    from edge.answers import detect as det

    found = det.kept(raw, threshold)
    if raw.keypoints is None:
        return tuple(found)
    points = raw.keypoints[raw.scores >= threshold].astype(np.float32)
    points[..., :2] = np.clip(points[..., :2], 0.0, 1.0)
    return (*found, points)


def task_of(detector: Any) -> str:
    """The predictions document's task for a detector: "pose" when its objects carry keypoints, else "detect"."""
    from edge.answers.heads import keypoints

    return "pose" if isinstance(detector.indices, keypoints.Layout) else "detect"


def detections_document(model: Path, detector: Any, labels: Optional[List[str]], entries: List[Dict[str, Any]],
                        errors: List[Dict[str, Any]]) -> Dict[str, Any]:
    """What `edge evaluate --out` writes for a detector (a pose model's: "task": "pose", each object's keypoints too)."""
    runner = detector.runner
    return predictions_doc.predictions_document(model.name, runner.sha256, runner.loaded.backend, runner.loaded.edgetpu, labels,
                                                entries, None, 1, None, None, errors, task=task_of(detector))


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
    bundle = read_bundle(data)
    path = data / BUNDLE_NAME
    if labels is not None and bundle.labels and labels != bundle.labels:
        raise InputError(f"{path} labels {bundle.labels} differ from the model's labels {labels}; expected the same classes in the same order")
    labels = labels if labels is not None else bundle.labels
    samples = []
    for i, image in enumerate(bundle.images):
        if image.label is not None and labels is not None and image.label >= len(labels):
            raise InputError(f"{path} images[{i}] has label {image.label!r}, expected a class index below {len(labels)} or null")
        samples.append(Sample(data / image.file, image.file, image.label, image.id, image.sha256))
    return samples, labels


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
        """Precision, recall, F1 and support per class id and macro-F1 (edge/answers/metrics.py: scikit-learn's definitions)."""
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
    return predictions_doc.prediction(sample.rel, sample.id, sample.label, sample.sha256, scores)


def predictions_document(model: Path, runner: Any, labels: Optional[List[str]], predictions: List[Dict[str, Any]],
                         tally: Tally, errors: List[Dict[str, Any]]) -> Dict[str, Any]:
    """What `edge evaluate --out` writes, from the runner that scored and the tally that counted."""
    return predictions_doc.predictions_document(model.name, runner.sha256, runner.loaded.backend, runner.loaded.edgetpu, labels,
                                                predictions, tally.top1, tally.k, tally.top_k, tally.classes(runner.num_classes),
                                                errors)
