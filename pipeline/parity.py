"""`pipeline parity`: does the small model answer like the big one, on the same held-out images?

    pipeline parity runs/digits                      float vs int8 on this CPU; exit 1 if the gate fails
    pipeline parity runs/digits --bundle bundle/     held-out images + models to copy to a device
    pipeline parity runs/digits --device-results predictions.json   adds the Edge TPU's answers

Every model sees the held-out images as the device will: the original files, decoded and resized
by the pixel contract (edge.preprocess). The float SavedModel is the reference. The float TFLite
model (when exported), the int8 model on the CPU interpreter and, when given, the predictions a
device made with `edge evaluate` on the bundle are each compared with it: top-1 and top-k
accuracy, agreement, accuracy drop, per-class deltas, score errors, per-class precision, recall and F1
and macro-F1 (pipeline/inference/class_metrics.py). The gate (pipeline/gate.py: --max-drop on top-1
accuracy, or on macro-F1 with --gate-metric macro_f1, and --min-agreement) applies to the int8 model and
to the device; it counts exactly, so a limit sits exactly where the user put it. Its floor applies to the
float model too: better than always answering the most frequent held-out class, or --min-accuracy.
Each known classification client (pipeline/inference/client_scores.py: edgeflow's contract, pycoral's
classify_image.py, MediaPipe's ImageClassifier) gets a row of its own: the int8 model on the same interpreter,
fed each held-out file as that client would feed it. The rows are reported; --clients pycoral,mediapipe
gates the named ones like the int8 model.
Reports go to RUN/parity/ whether the gate passes or not.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from edge.bundle import image_file
from edge.contract import PixelContract
from edge.integrity import sha256_bytes
from edge.predictions import read_predictions
from edge.runner import Runner
from pipeline import gate, tasks
from pipeline.console import native_quiet
from pipeline.data.heldout import Heldout, heldout_examples
from pipeline.errors import ConfigError, DataError
from pipeline.gate import GATE, GATED, REFERENCE
from pipeline.inference import class_metrics
from pipeline.inference.client_scores import CLIENTS, for_task, gate_name, score_clients
from pipeline.inference.bundle import DEVICE_MODELS
from pipeline.inference.parity_report import markdown, plot
from pipeline.report import disagreements, write as write_report
from pipeline.rundir.files import json_bytes
from pipeline.rundir.run import Run, artifact, writing
from pipeline.training import chance


@dataclass(frozen=True)
class ParityConfig:
    data: Optional[str] = None  # held-out data spec replacing the run's recorded split
    device_results: Optional[Path] = None  # PREDICTIONS.json written by `edge evaluate` on a device
    max_drop: float = GATE.max_drop  # percentage points of the gate metric (top-1 accuracy, or macro-F1 x 100) a gated model may lose
    min_agreement: float = GATE.min_agreement  # share of images whose top-1 must match the float model's
    top_k: int = 5  # k for top-k accuracy (clipped to the number of classes)
    min_accuracy: Optional[float] = None  # floor on top-1; None = better than always answering the majority class
    threads: Optional[int] = None  # CPU interpreter threads; None = the interpreter's default
    gate_metric: str = GATE.metric  # what --max-drop limits: top1 (images counted) | macro_f1 (exact, from per-class counts)
    clients: Tuple[str, ...] = ()  # clients gated like the int8 model (client_scores.parse_clients); the rest are reported

    @property
    def limits(self) -> gate.GateLimits:
        return gate.GateLimits(self.max_drop, self.min_agreement, self.gate_metric, self.min_accuracy)

    def validate(self) -> gate.GateLimits:
        """The gate's limits, after refusing an option out of range (ConfigError, like every stage's config)."""
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ConfigError(f"--top-k {self.top_k!r}, expected a whole number >= 1")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1):
            raise ConfigError(f"--threads {self.threads!r}, expected a whole number >= 1")
        return self.limits.validate()


class ParityResult(NamedTuple):
    report_dir: Path
    report: dict  # what report.json holds
    passed: bool
    failures: List[str]  # one line per failed limit


def check_parity(config: ParityConfig, run_dir: Path) -> ParityResult:
    """Evaluate every model of the run on the held-out images, write RUN/parity/, apply the gate."""
    limits = config.validate()
    with writing(run_dir, "pipeline parity") as run:
        own = tasks.of_run(run).parity(config, run)  # a task with its own comparison (detection)
        if own is not None:
            write_report(run.dir)
            return ParityResult(own.report_dir, own.report, not own.failures, list(own.failures))
        named = for_task(config.clients, "classify")  # "all" expanded; a detector-only client refused
        heldout = heldout_examples(run, config.data)
        images, labels = _heldout_pixels(run, heldout)
        scores, device, (client_scores, refused) = _scores(config, run, heldout, images)
        k = min(config.top_k, len(run.labels))
        models = {name: _compare(s, scores[REFERENCE], labels, k, len(run.labels)) for name, s in scores.items()}
        client_rows = _client_rows(client_scores, refused, scores[REFERENCE], labels, k, len(run.labels), named)
        floor = gate.Floor(chance.majority(labels, run.labels), limits.min_accuracy)
        gated = (*GATED, *(gate_name(c) for c in named))
        entries = {**models, **{gate_name(c): client_rows[c] for c in named if c in client_scores}}
        failures = [f"{gate_name(c)}: cannot feed the model: {refused[c]}" for c in named if c in refused]
        failures += gate.check({name: gate.classification_scores(m) for name, m in entries.items()}, limits,
                               gate.CLASSIFICATION, floor, gated=gated)
        verdict = gate.record(limits, floor, [*models, *(gate_name(c) for c in named)], failures, gated)
        report = _report(config, run, labels, k, models, device, verdict)
        report["clients"] = client_rows
        report["disagreements"] = disagreements.collect(scores, REFERENCE, GATED, labels, [e.id for e in heldout.examples])
        report_dir = _write_reports(run, report, scores, images, failures)
        write_report(run.dir)  # RUN/report.html; a failure to render only warns
    return ParityResult(report_dir, report, not failures, failures)


def _heldout_pixels(run: Run, heldout: Heldout):
    # The run's own contract, version included: what its device will do with these files.
    contract = run.contract
    images = np.stack([contract.load_pixels(original, (heldout.size, heldout.size), name=e.id)
                       for e, original in zip(heldout.examples, heldout.originals)])
    return images, np.array([e.label for e in heldout.examples], np.int64)


def _scores(config: ParityConfig, run: Run, heldout: Heldout, images: np.ndarray):
    """Each model's scores on the held-out images, what the device results file says of itself (or None), and
    each client's scores of the int8 model with the clients that could not feed it."""
    scores = {REFERENCE: _reference_scores(run, images)}
    device = None
    for name, key in (("float_tflite_cpu", "model_float"), ("int8_cpu", "model_int8")):
        if run.has(key) or key == "model_int8":  # the int8 model is required: "run export --int8 first"
            # Each model by its own contract (an int8 export takes mean 128, std 128), the run's decode.
            contract = run.contract_of(key)
            runner = _runner(run.artifact(key), contract, config.threads)
            scores[name] = runner.score_all(images)
    # The clients on the int8 row's own interpreter: only the feed differs. The files as the bundle ships them.
    files = [image_file(i, e.id, original)[1] for i, (e, original) in enumerate(zip(heldout.examples, heldout.originals))]
    clients = score_clients(runner, files, contract)
    if config.device_results:
        device = _device_results(Path(config.device_results), run, heldout)
        scores["edgetpu" if device["edgetpu"] else "device_cpu"] = np.asarray(device.pop("scores"), np.float32)
    return scores, device, clients


def _client_rows(scores: Dict[str, np.ndarray], refused: Dict[str, str], reference: np.ndarray, labels: np.ndarray,
                 k: int, num_classes: int, gated: Sequence[str]) -> Dict[str, dict]:
    """report.json's "clients": per client, the int8 model's numbers as that client feeds it (as a model entry),
    how it feeds, whether the gate applies; or why it could not feed the model."""
    rows = {}
    for name, client in CLIENTS.items():
        head = {"feed": client.says, "gated": name in gated}
        rows[name] = ({**head, **_compare(scores[name], reference, labels, k, num_classes)} if name in scores
                      else {**head, "refused": refused[name]})
    return rows


def _report(config: ParityConfig, run: Run, labels: np.ndarray, k: int, models: Dict[str, dict], device: Optional[dict],
            verdict: dict) -> dict:
    return {
        "schema_version": artifact("parity_report").schema,
        "heldout": {"images": int(len(labels)), "source": config.data or "run's recorded held-out split",
                    "pixels": "original files through the pixel contract (edge.preprocess)"},
        "labels": run.labels,
        "reference": REFERENCE,
        **({"reference_model": _imported_reference(run)} if run.origin else {}),
        "top_k": k,
        "models": models,
        "device": device,
        "gate": verdict,
    }


def _imported_reference(run: Run) -> str:
    from pipeline.importing import reference

    return reference.describe(run.origin)


def _reference_scores(run: Run, images: np.ndarray) -> np.ndarray:
    """The reference row: RUN's SavedModel, or for an imported model the original as given (pipeline/importing)."""
    if run.origin:
        from pipeline.importing import reference

        return reference.scores(run.dir, run.origin, images)
    return _savedmodel_scores(run, images)


def _savedmodel_scores(run: Run, images: np.ndarray) -> np.ndarray:
    import tensorflow as tf

    path = run.artifact("saved_model")
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    out = []
    for start in range(0, len(images), 128):
        result = serve(tf.constant(images[start:start + 128], tf.float32))
        out.append(next(iter(result.values())).numpy())
    return np.concatenate(out).astype(np.float32)


def _tflite_scores(model: Path, images: np.ndarray, contract: PixelContract, threads: Optional[int]) -> np.ndarray:
    """Scores one image at a time through the device's own runner: what the device will run."""
    return _runner(model, contract, threads).score_all(images)


def _runner(model: Path, contract: PixelContract, threads: Optional[int]) -> Runner:
    """The device's own runner on the CPU (it scores one image at a time): what the device will run."""
    with native_quiet():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." from C++
        return Runner.with_contract(model, contract, edgetpu=False, threads=threads)


def _device_results(path: Path, run: Run, heldout: Heldout) -> dict:
    """Predictions from `edge evaluate` on this run's bundle: the model it shipped, the images it shipped, in order."""
    results = read_predictions(path)  # the document's form; what it answers for is checked here
    predictions, examples = results.predictions, heldout.examples
    shipped = {run.entry(key)["sha256"]: key for key in DEVICE_MODELS if run.has(key)}
    model_key = shipped.get(results.model_sha256)
    if model_key is None:
        raise DataError(f"device results {path} come from a model (sha256 {str(results.model_sha256)[:12]}…) that is "
                        f"not this run's {' or '.join(DEVICE_MODELS)}; expected `edge evaluate` of a model from this run's bundle")
    if len(predictions) != len(examples):
        raise DataError(f"device results {path} hold {len(predictions)} predictions, the held-out split has {len(examples)} images; "
                        "expected `edge evaluate` on the bundle from `pipeline parity RUN --bundle DIR`")
    if model_key != "model_int8":
        run.check_compiled_is_current(model_key)
    for i, (p, example, original) in enumerate(zip(predictions, examples, heldout.originals)):
        if p.id != example.id:
            raise DataError(f"device result {i} is for example {p.id!r}, held-out image {i} is {example.id!r}: "
                            "the device evaluated other images (or an older bundle)")
        if p.label != example.label:
            raise DataError(f"device result {i} ({example.id}) has label {p.label!r}, expected {example.label}")
        if len(p.scores) != len(run.labels):
            raise DataError(f"device result {i} ({example.id}) does not hold {len(run.labels)} scores")
        expected = sha256_bytes(image_file(i, example.id, original)[1])
        if p.sha256 != expected:
            raise DataError(f"device result {i} ({example.id}) is for an image with sha256 {str(p.sha256)[:12]}…, this "
                            f"run's held-out image is {expected[:12]}…: the device evaluated other bytes (or results of an "
                            "earlier edge, which recorded none); run `edge evaluate` on a new bundle")
    return {"file": str(path), "model": model_key, "backend": results.backend, "edgetpu": results.edgetpu,
            "scores": [p.scores for p in predictions]}


def _compare(scores: np.ndarray, reference: np.ndarray, labels: np.ndarray, k: int, num_classes: int) -> dict:
    top1 = scores.argmax(axis=1)
    ref_top1 = reference.argmax(axis=1)
    topk = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    per_class = _per_class_accuracy(top1, labels, num_classes)
    ref_per_class = _per_class_accuracy(ref_top1, labels, num_classes)
    error = np.abs(scores - reference)
    n, correct, ref_correct = len(labels), int((top1 == labels).sum()), int((ref_top1 == labels).sum())
    agree = int((top1 == ref_top1).sum())
    return {
        "images": n,
        "correct": correct,  # the gate works on these counts; the ratios below are for people
        "agree": agree,
        "drop_images": ref_correct - correct,
        "top1": correct / n,
        f"top{k}": float((topk == labels[:, None]).any(axis=1).mean()),
        "agreement": agree / n,
        "drop_pp": (ref_correct - correct) * 100 / n,
        "per_class_accuracy": per_class,
        "per_class_delta_pp": [None if a is None or b is None else (a - b) * 100 for a, b in zip(per_class, ref_per_class)],
        "score_error_mean": float(error.mean()),
        "score_error_max": float(error.max()),
        "confusion": _confusion(top1, labels, num_classes).tolist(),
        **class_metrics.compared(top1, ref_top1, labels, num_classes),
    }


def _per_class_accuracy(predicted: np.ndarray, labels: np.ndarray, num_classes: int) -> List[Optional[float]]:
    return [float((predicted[labels == c] == c).mean()) if (labels == c).any() else None for c in range(num_classes)]


def _confusion(predicted: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    matrix = np.zeros((num_classes, num_classes), np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    return matrix


def _write_reports(run: Run, report: dict, scores, images: np.ndarray, failures: List[str]) -> Path:
    """report.json, report.md, confusion.png and the thumbnails of the images a model answers differently from
    float, in RUN/parity/, with the manifest, in one transaction; any other file a user put in RUN/parity/ stays."""
    names = [REFERENCE] + [n for n in scores if n in GATED]
    with run.transaction() as t:
        path = t.write("parity_report", json_bytes(report))
        t.write_file(path.with_name("report.md"), markdown(report).encode("utf-8"))
        t.write_file(path.with_name("confusion.png"), plot(report, names))
        for name, data in disagreements.thumbnails(images, report["disagreements"]).items():
            t.write_file(path.parent / name, data)
        t.set("parity", {"passed": not failures, "failures": failures,
                         **{name: {"top1": m["top1"], "macro_f1": m["macro_f1"], "agreement": m["agreement"]}
                            for name, m in report["models"].items()},
                         "clients": {name: ({"refused": c["refused"]} if "refused" in c else
                                            {"top1": c["top1"], "macro_f1": c["macro_f1"], "agreement": c["agreement"],
                                             "drop_pp": c["drop_pp"]}) | {"gated": c["gated"]}
                                     for name, c in report["clients"].items()}})
    return path.parent
