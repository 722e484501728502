"""A classifier's side of `pipeline parity` (pipeline/tasks/comparison.py): each model's softmax scores on the
held-out images, compared with the float SavedModel's: top-1 and top-k accuracy, agreement, accuracy drop,
per-class deltas, score errors, per-class precision, recall and F1 and macro-F1 (pipeline/tasks/classify/class_metrics.py).
Each classification client (pipeline/tasks/classify/clients.py) gets a row: the int8 model on the same
interpreter, fed each held-out file as that client would feed it. The floor: better than always answering the
most frequent held-out class (pipeline/tasks/classify/chance.py), or --min-accuracy.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from edge.pixels.contract import PixelContract
from edge.answers.runner import Runner
from pipeline.console import native_quiet
from pipeline.data.heldout import Heldout, heldout_examples
from pipeline.errors import DataError
from pipeline.gate import GATED, REFERENCE, GateLimits
from pipeline.tasks.classify import class_metrics, disagreements, scores
from pipeline.tasks.classify.clients import CLIENTS, score_clients
from pipeline.tasks.classify.report import markdown, plot, summary_table
from pipeline.remedy import advice
from pipeline.rundir.files import json_bytes, versioned
from pipeline.rundir.run import Run, artifact
from pipeline.tasks.comparison import Comparison, Held
from pipeline.tasks.classify import chance


class ClassifyComparison(Comparison):
    name = "classify"
    holds = "a classifier's scores"
    metrics = scores.METRICS
    floor_metric = "top1"

    def heldout(self, config, run: Run) -> Held:
        heldout = heldout_examples(run, config.data)
        images, labels = _heldout_pixels(run, heldout)
        options = config.task_options  # pipeline/tasks/classify/options.py's, defaults filled
        self.k, self.num_classes, self.threads = min(options["top_k"], len(run.labels)), len(run.labels), config.threads
        self.gate_metric = options["gate_metric"]
        self.run, self.fed, self.checked = run, {}, heldout.checked
        return Held([e.id for e in heldout.examples], list(heldout.originals), images, labels,
                    config.data or "run's recorded held-out split", run.labels)

    def reference(self, run: Run, held: Held) -> np.ndarray:
        """RUN's SavedModel, or for an imported model the original as given (pipeline/importing)."""
        if run.origin:
            from pipeline.importing import reference

            return reference.scores(run.dir, run.origin, held.pixels)
        return _savedmodel_scores(run, held.pixels)

    def open(self, run: Run, key: str, config) -> Runner:
        # Each model by its own contract (an int8 export takes mean 128, std 128), the run's decode.
        return _runner(run.artifact(key), run.contract_of(key), config.threads)

    def answers(self, opened: Runner, held: Held) -> np.ndarray:
        return opened.score_all(held.pixels)

    def clients(self, opened: Runner, files: Sequence[bytes]):
        self.fed = {}  # each client's input pixels, for the float model fed alike (client_rows)
        return score_clients(opened, files, opened.contract, fed=self.fed)

    def device_answers(self, checked, run: Run, held: Held) -> np.ndarray:
        for i, (p, label) in enumerate(zip(checked.results.predictions, held.truth)):
            if p.label != label:
                raise DataError(f"device result {i} ({p.id}) has label {p.label!r}, expected {label}")
            if len(p.scores) != len(run.labels):
                raise DataError(f"device result {i} ({p.id}) does not hold {len(run.labels)} scores")
        return np.asarray([p.scores for p in checked.results.predictions], np.float32)

    def entry(self, held: Held, scores: np.ndarray, reference: np.ndarray) -> dict:
        return compare(scores, reference, held.truth, self.k, self.num_classes)

    def client_rows(self, held: Held, found, refused, entries, reference, named) -> Dict[str, dict]:
        """report.json's "clients": per client, the int8 model's numbers as that client feeds it (as a model entry),
        how it feeds, whether the gate applies, and the float model fed the same pixels (`float_fed_alike`: which part
        of the client's loss is the float model's own, which a training change repairs, and which is int8's against
        it, which a remedy with --clients repairs); or why it could not feed the model."""
        rows = {}
        float_top1 = float(np.mean(reference.argmax(1) == held.truth))
        # Whether training already fitted images as the clients do (None: a run from before the fits, or imported):
        # the advice for a feed the float model loses under depends on it (parity_report.client_advice).
        fits = ((self.run.manifest.get("training") or {}).get("feed") or {}).get("client_fits") or {}
        for name, client in CLIENTS.items():
            head = {"feed": client.says, "gated": name in named}
            if name not in found:
                rows[name] = {**head, "refused": refused[name]}
                continue
            rows[name] = {**head, **compare(found[name], reference, held.truth, self.k, self.num_classes)}
            if name in self.fed:
                alike = self.reference(self.run, held._replace(pixels=self.fed[name]))
                alike_row = fed_alike(found[name], alike, held.truth, float_top1)
                rows[name]["float_fed_alike"] = {**alike_row, "trained_with_client_fits": fits.get("on"),
                                                 **advice.client_remedy(name, alike_row, self.run.manifest)}
        return rows

    def limits(self, limits):
        """--gate-metric chooses what --max-drop limits."""
        return limits._replace(metric=self.gate_metric).validate(self.metrics)

    def gate_scores(self, entry: dict) -> dict:
        return scores.gate_scores(entry)

    def chance(self, held: Held):
        return chance.majority(held.truth, held.labels)

    def report(self, config, run: Run, held: Held, entries, clients, device, verdict, answers) -> dict:
        return {
            **versioned(artifact("parity_report").schema),
            "heldout": {"images": int(len(held.truth)), "source": held.source,
                        "pixels": "original files through the pixel contract (edge.pixels.preprocess)",
                        **(self.checked or {})},
            "labels": run.labels,
            "reference": REFERENCE,
            **({"reference_model": _imported_reference(run)} if run.origin else {}),
            "top_k": self.k,
            "models": entries,
            "device": device,
            "gate": verdict,
            "clients": clients,
            "disagreements": disagreements.collect(answers, REFERENCE, GATED, held.truth, held.ids),
            **_near_ties(run, answers, verdict),
        }

    def write(self, run: Run, report: dict, answers, held: Held, failures: List[str]) -> Path:
        return _write_reports(run, report, answers, held.pixels, failures)

    def summary(self, report: dict) -> str:
        why = advice.more_images_line(report)
        return summary_table(report) + (f"\n{why}" if why else "")


def _near_ties(run: Run, answers, verdict: dict) -> dict:
    """report.json's "near_ties" when int8 fails the gate and the float model's near ties explain it (remedy.advice)."""
    if verdict["passed"] or "int8_cpu" not in answers:
        return {}
    limits = GateLimits(verdict["max_drop_pp"], verdict["min_agreement"], verdict.get("metric", "top1"))
    ties = advice.held_out_ties(answers[REFERENCE], answers["int8_cpu"], run.manifest, limits)
    return {"near_ties": ties} if ties else {}


def fed_alike(scores: np.ndarray, alike: np.ndarray, truth: np.ndarray, float_top1: float) -> dict:
    """The float model fed as a client feeds (`alike`) beside the int8 model fed so (`scores`): its top-1, what the
    client's feed costs the float model itself (pp against float fed the pixel contract), and what int8 loses
    against it (pp, and agreement)."""
    top1 = float(np.mean(alike.argmax(1) == truth))
    return {"top1": top1, "float_drop_pp": (float_top1 - top1) * 100,
            "int8_drop_pp": (top1 - float(np.mean(scores.argmax(1) == truth))) * 100,
            "agreement": float(np.mean(scores.argmax(1) == alike.argmax(1)))}


def _heldout_pixels(run: Run, heldout: Heldout):
    # The run's own contract, version included: what its device will do with these files.
    contract = run.contract
    images = np.stack([contract.load_pixels(original, (heldout.size, heldout.size), name=e.id)
                       for e, original in zip(heldout.examples, heldout.originals)])
    return images, np.array([e.label for e in heldout.examples], np.int64)


def _imported_reference(run: Run) -> str:
    from pipeline.importing import reference

    return reference.describe(run.origin)


def _savedmodel_scores(run: Run, images: np.ndarray) -> np.ndarray:
    import tensorflow as tf

    path = run.artifact("saved_model")
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    out = []
    for start in range(0, len(images), 128):
        result = serve(tf.constant(images[start:start + 128], tf.float32))
        out.append(next(iter(result.values())).numpy())
    return np.concatenate(out).astype(np.float32)


def tflite_scores(model: Path, images: np.ndarray, contract: PixelContract, threads: Optional[int]) -> np.ndarray:
    """Scores one image at a time through the device's own runner: what the device will run."""
    return _runner(model, contract, threads).score_all(images)


def _runner(model: Path, contract: PixelContract, threads: Optional[int]) -> Runner:
    """The device's own runner on the CPU (it scores one image at a time): what the device will run."""
    with native_quiet():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." from C++
        return Runner.with_contract(model, contract, edgetpu=False, threads=threads)


def compare(scores: np.ndarray, reference: np.ndarray, labels: np.ndarray, k: int, num_classes: int) -> dict:
    """One model's scores against the reference's: the counts the gate works on, and the ratios for people."""
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
                                             "drop_pp": c["drop_pp"],
                                             **({"float_fed_alike": c["float_fed_alike"]} if "float_fed_alike" in c else {})})
                                           | {"gated": c["gated"]}
                                     for name, c in report["clients"].items()}})
    return path.parent
