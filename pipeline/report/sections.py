"""What each section of the report shows, read from the run directory (no TensorFlow).

Each section is a dict for the template: `ran` False says its stage has not run (with the command
that runs it); `error` says why a section could not be read, and the rest of the page still
renders. Files are read through the run (`Run.artifact` checks each one's sha256), with the
schema of the code that writes them: pipeline/train.py (history.json), pipeline/quant/report.py
(quantization.json), pipeline/compile.py and pipeline/edgetpu/ (edgetpu.json), pipeline/parity.py
(parity/report.json), `edge bench --json` (latency.json). Over 300 lines: one reader per section,
kept together so the page's sections and their sources are read in one place.
"""
from __future__ import annotations

import base64
import json
import numbers
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from pipeline import tasks
from pipeline.gate import CLASSIFICATION, GATED
from pipeline.inference.parity_report import worst_client
from pipeline.tasks.classify import disagreements
from pipeline.tasks.detect import report as detection
from pipeline.report import latency, plots
from pipeline.rundir.run import Run

# (stage, the artifact that says it ran, the command that runs it)
STAGES = (
    ("train", "history", "pipeline train --data SPEC --out RUN"),
    ("export", "model_int8", "pipeline export RUN --int8"),  # every task's int8 export writes it
    ("compile", "edgetpu_report", "pipeline compile RUN (or --check-only without edgetpu_compiler)"),
    ("parity", "parity_report", "pipeline parity RUN"),
    ("latency", latency.KEY, "edge bench MODEL --json bench.json on the device, then pipeline report RUN --latency bench.json"),
)
_COMMAND = {stage: command for stage, _, command in STAGES}
# Keys of an epoch in history.json that are not metrics.
_NOT_METRICS = ("epoch", "seconds", "resumed", "lr")
# Numbers parity/report.json gives every model today (pipeline/tasks/classify/parity.py `compare`): the table shows
# them, or what they add up to, in its own columns. Any other number gets a column named by its key.
_PARITY_KNOWN = ("images", "correct", "agree", "drop_images", "top1", "agreement", "drop_pp", "score_error_mean",
                 "score_error_max")


def gather(run: Run) -> Dict[str, Any]:
    """Every section's dict, each read on its own: one that fails carries its error; and the page's headline."""
    sections = {
        "run": _guarded(run_section, run),
        "training": _guarded(training_section, run),
        "detection": _guarded(detection.section, run),  # a detection run's own section
        "quantization": _guarded(quantization_section, run),
        "edgetpu": _guarded(edgetpu_section, run),
        "parity": _guarded(parity_section, run),
        "latency": _guarded(latency_section, run),
    }
    return {**sections, "glance": glance(sections)}


def glance(sections: Dict[str, dict]) -> List[dict]:
    """The answers people look for first, from the sections that ran: (label, value, tone) tiles."""
    tiles = []
    parity, quant, tpu = sections["parity"], sections["quantization"], sections["edgetpu"]
    if _usable(parity):
        models = parity["models"]
        tiles.append({"label": f"top-1, {parity['reference']}", "value": _fixed(models[parity["reference"]]["top1"])})
        for name in GATED:
            if name in models:
                tiles.append({"label": f"top-1, {name}", "value": _fixed(models[name]["top1"])})
                tiles.append({"label": f"agreement, {name}", "value": _fixed(models[name]["agreement"])})
        tiles.append({"label": "parity gate", "value": "passed" if parity["gate"]["passed"] else "FAILED",
                      "tone": "good" if parity["gate"]["passed"] else "bad"})
    elif _usable(sections["detection"]):
        tiles.append({"label": "held-out mAP@.5 after training", "value": _fixed(sections["detection"]["map50"])})
        tiles.append({"label": "held-out mAP@[.5:.95]", "value": _fixed(sections["detection"]["map"])})
    elif _usable(sections["training"]):
        tiles.append({"label": "held-out accuracy after training", "value": _fixed(sections["training"]["heldout"].get("accuracy"))})
    if _usable(quant):
        sizes = quant["sizes"]
        tiles.append({"label": "int8 size", "value": f"{sizes['int8_bytes'] / 1024:.1f} KiB",
                      **({"note": f"float32 {sizes['float32_bytes'] / 1024:.1f} KiB"} if sizes.get("float32_bytes") else {})})
    if _usable(tpu):
        pre = tpu["preflight"]
        tiles.append({"label": "ops on the Edge TPU" + ("" if tpu["compiler"] else " (predicted)"),
                      "value": f"{pre['ops_on_edgetpu']} / {pre['total_ops']}", "tone": "good" if pre["ops_on_cpu"] == 0 else "warn"})
    if _usable(sections["latency"]):
        tiles.append({"label": "median latency", "value": f"{sections['latency']['bench']['median_ms']:.2f} ms",
                      "note": sections["latency"]["bench"]["backend"]})
    return tiles


def _usable(section: dict) -> bool:
    return bool(section.get("ran")) and not section.get("error")


def _guarded(section: Callable[[Run], dict], run: Run) -> dict:
    try:
        return section(run)
    except Exception as err:  # one unreadable file must not take the whole page with it
        return {"ran": True, "error": f"{type(err).__name__}: {err}"}


def _not_run(stage: str) -> dict:
    return {"ran": False, "error": None, "command": _COMMAND[stage]}


def _read_json(run: Run, key: str) -> Any:
    return json.loads(run.artifact(key).read_text())


# ---------------------------------------------------------------------------------------------


def run_section(run: Run) -> dict:
    """Data (classes with counts, held-out size, identity digests), model, strategy, versions, stages."""
    data, model, training, labels = run.data, run.model, run.training, run.labels
    (train_counts, unit), (heldout_counts, _) = _class_counts(data.summary("train"), labels), _class_counts(data.summary("heldout"), labels)
    split = data.split
    size = model.get("image_size")
    return {
        "ran": True, "error": None,
        "name": run.dir.resolve().name, "path": str(run.dir.resolve()), "updated": run.updated,
        "stages": [{"name": stage, "done": run.has(key), "command": command} for stage, key, command in STAGES],
        "classes": [{"name": n, "train": t, "heldout": h} for n, t, h in zip(labels, train_counts, heldout_counts)],
        "counted": unit,  # what a class's count counts: images (a classifier's), objects (a detector's)
        "data": _present({
            "training data": data.train.get("spec"),
            "kind": data.train.get("kind"),
            "held-out data": data.val_spec or (split.get("method") and "a split of the training data"),
            "split": split.get("method"),
            "training examples": split.get("train_examples"),
            "held-out examples": split.get("heldout_examples"),
            # An import's tuning split is a share of --val-data, so the held-out count is less than --val-data holds.
            "tuning examples (set aside from the held-out data)": split.get("tuning_examples") if split.get("tuning_from") else None,
            "training examples digest": _digest_prefix(data.summary("train").get("sha256")),
            "held-out examples digest": _digest_prefix(data.summary("heldout").get("sha256")),
        }),
        "heldout_examples": split.get("heldout_examples"),
        "model": _present({
            "name": model.get("name"), "input": size and f"{size}x{size} RGB",
            "classes": model.get("num_classes"), "parameters": model.get("parameters"),
            "options": model.get("options") or None,
            "starting weights": model.starting_weights,
            "preprocessing in the model": model.get("in_model_preprocessing"),
        }),
        "strategy": _present({
            "strategy": training.get("strategy_description"), "replicas": training.get("replicas"),
            "global batch": training.get("global_batch"), "steps per epoch": training.get("steps_per_epoch"),
            "steps per execution": training.get("steps_per_execution"), "mixed precision": training.get("mixed_precision"),
            "decoded training set kept in memory": training.feed.get("cached"),
        }),
        "contract": _present(_contract_shown(run)),
        "versions": run.versions or {},
    }


def _class_counts(summary: Dict[str, Any], labels: List[str]):
    """(count per class, what is counted) from the data identity's summary of a split: images per class for a
    classifier, objects per class for a detector; Nones when the manifest records neither."""
    if summary.get("per_class"):
        return summary["per_class"], "images"
    if summary.get("objects_per_class"):
        return summary["objects_per_class"], "objects"
    return [None] * len(labels), "images"


def training_section(run: Run) -> dict:
    """Loss and accuracy per epoch (training and held-out), learning rate, frozen / fine-tune switch, resumes."""
    if not run.has("history"):
        return _not_run("train")
    history = _read_json(run, "history")
    training = run.training
    config = training.config
    frozen = int(config.get("frozen_epochs") or 0)
    switch = frozen if 0 < frozen < len(history) else None  # the last frozen epoch, when fine-tuning followed
    resumes = [e["epoch"] for e in history if e.get("resumed")]
    metrics = [k for k in history[0] if k not in _NOT_METRICS] if history else []
    logs = training.get("tensorboard")
    return {
        "ran": True, "error": None,
        "epochs": history, "metrics": metrics, "resumes": resumes, "frozen_epochs": frozen, "switch": switch,
        "fine_tune_learning_rate": config.get("fine_tune_learning_rate") if switch else None,
        "unfreeze_from": config.get("unfreeze_from"),
        "schedule": training.get("schedule"),
        "heldout": run.heldout_metrics,
        "seconds": round(sum(e.get("seconds", 0.0) for e in history), 1),
        "plot": plots.training_curves(history, switch, resumes) if history else None,
        "tensorboard": str(run.dir / logs) if logs and (run.dir / logs).is_dir() else None,
    }


def quantization_section(run: Run) -> dict:
    """Sizes float vs int8, per-layer error (worst layers named), calibration, integer-only check."""
    if not run.has("quantization_report"):
        return _exported(run) if run.has("model_int8") else _not_run("export")
    report = _read_json(run, "quantization_report")
    by_tensor = {layer["tensor"]: layer for layer in report["layers"]}
    worst = [by_tensor[name] for name in report["worst_layers"] if name in by_tensor]
    return {
        "ran": True, "error": None,
        "sizes": report["sizes"], "ops": report["ops"], "per_channel_tensors": report["per_channel_tensors"],
        "input": report.get("input"), "output": report.get("output"), "raw_pixels": report.get("raw_pixels"),
        "calibration": report.get("calibration") or {}, "qat": report.get("qat"), "debug_images": report.get("debug_images"),
        "layers": len(report["layers"]), "worst": worst, "notes": report.get("notes") or [],
        "plot": plots.layer_errors(report["layers"], report["worst_layers"]) if report["layers"] else None,
        "verification": _verify_int8(run, (report.get("input") or {}).get("dtype")),
        "remedy": run.remedy,  # `export --int8 --remedy`: every attempt, next to the per-layer error
    }


def _exported(run: Run) -> dict:
    """An int8 export that wrote no per-layer report (a detector's, which ends in the float post-processing op, or one
    run with --no-layer-errors): its sizes (a detector's own section shows the remedy ladder's attempts)."""
    float_bytes = run.artifact("model_float").stat().st_size if run.has("model_float") else None
    int8_bytes = run.artifact("model_int8").stat().st_size
    ratio = int8_bytes / float_bytes if float_bytes and int8_bytes else None
    return {"ran": True, "error": None, "brief": True,
            "sizes": {"float32_bytes": float_bytes, "int8_bytes": int8_bytes, "ratio": ratio}}


def _verify_int8(run: Run, io_dtype: Optional[str]) -> dict:
    """The export's integer-only check, run again now on the int8 file the run records."""
    from pipeline.quant import verify

    if not run.has("model_int8"):
        return {"checked": False, "problems": [], "what": "the run records no int8 model"}
    path = run.artifact("model_int8")
    io_dtype = run.entry("model_int8").get("io_type") or io_dtype or "uint8"
    try:
        verify.verify_int8(path.read_bytes(), io_dtype)
        problems: List[str] = []
    except verify.VerificationError as err:
        problems = str(err).splitlines()[1:] or [str(err)]
    return {"checked": True, "problems": [p.strip() for p in problems], "file": path.name, "io_dtype": io_dtype}


def edgetpu_section(run: Run) -> dict:
    """The op strip (predicted, and compiled when a compiler ran), the first fallback and its reason, what to change."""
    if not run.has("edgetpu_report"):
        return _not_run("compile")
    report = _read_json(run, "edgetpu_report")
    pre = report["preflight"]
    first = pre.get("first_fallback")
    current = run.entry("model_int8").get("sha256") if run.has("model_int8") else None
    return {
        "ran": True, "error": None,
        "model": report.get("model"), "stale": current is not None and report.get("model_sha256") != current,
        "preflight": pre, "first": first,
        "ops": [dict(op, first=bool(first) and op["index"] == first["index"]) for op in pre["ops"]],
        "advice": pre.get("advice"),  # what to change, per problem (None in a report from before the advice)
        "compiler": report.get("compiler"), "compiled": report.get("compiled") or [],
        "disagreements": report.get("disagreements") or [],
    }


def parity_section(run: Run) -> dict:
    """Every model side by side, the gate, confusion matrices, per-class deltas, the images that differ."""
    if not run.has("parity_report"):
        return _not_run("parity")
    path = run.artifact("parity_report")
    report = json.loads(path.read_text())
    task = tasks.get(report.get("task", tasks.DEFAULT))  # a report from before tasks is a classifier's
    if task.report_parity_section != "parity":
        return {"ran": False, "error": None, "elsewhere": f"The {task.name} run's parity is in its own section above."}
    k, labels = report["top_k"], report["labels"]
    models = report["models"]
    # Numbers a newer parity adds (macro-F1, ...) get columns of their own, named by their keys.
    extra = [key for key in _numbers_in(models) if key not in _PARITY_KNOWN and key != f"top{k}"]
    extra.sort(key=lambda key: ("f1" not in key.lower(), key))
    reference = models[report["reference"]]
    per_class = [{"name": name, "images": int(sum(reference["confusion"][c])),
                  "reference": reference["per_class_accuracy"][c],
                  "deltas": {m: models[m]["per_class_delta_pp"][c] for m in models if m != report["reference"]}}
                 for c, name in enumerate(labels)]
    compared = [m for m in models if m != report["reference"]]
    return {
        "ran": True, "error": None,
        "heldout": report["heldout"], "reference": report["reference"], "k": k, "labels": labels,
        "models": models, "extra": extra, "gate": report["gate"], "device": report.get("device"),
        # What the gate's --max-drop limited (a report from before --gate-metric limited top-1).
        "gate_metric": CLASSIFICATION[report["gate"].get("metric", "top1")].short,
        "per_class": per_class, "compared": compared,
        "confusions": {name: plots.confusion(m["confusion"], labels, f"{name}: top-1 {m['top1']:.4f}") for name, m in models.items()},
        "deltas_plot": plots.class_deltas(labels, {m: models[m]["per_class_delta_pp"] for m in compared}) if compared else None,
        "disagreements": _disagreements(path.parent, report.get("disagreements"), labels),
        # The int8 model as each client feeds it (a report from before the clients has none).
        "clients": report.get("clients") or {}, "worst_client": worst_client(report.get("clients") or {}),
    }


def _disagreements(parity_dir: Path, record: Optional[dict], labels: List[str]) -> Optional[dict]:
    if record is None:  # a report written before parity kept them
        return None
    shown = []
    for entry in record["kept"]:
        thumbnail = parity_dir / entry["thumbnail"]
        shown.append({**entry, "label_name": labels[entry["label"]],
                      # The float answer and the answers of the models compared with it.
                      "answer_names": {m: labels[entry["answers"][m]] for m in [record["reference"], *record["models"]]},
                      "image": _data_uri(thumbnail.read_bytes(), "image/png") if thumbnail.is_file() else None})
    return {"total": record["total"], "models": record["models"], "reference": record["reference"], "shown": shown,
            "limit": disagreements.MAX_KEPT}


def latency_section(run: Run) -> dict:
    """What `edge bench` measured, and which of the run's models it measured."""
    if not run.has(latency.KEY):
        return _not_run("latency")
    bench = _read_json(run, latency.KEY)
    measured = next((key for key in run.recorded() if run.entry(key).get("sha256") == bench.get("model_sha256")
                     and key != latency.KEY), None)
    return {"ran": True, "error": None, "bench": bench, "measured": measured}


# ---------------------------------------------------------------------------------------------


def _contract_shown(run: Run) -> Dict[str, Any]:
    """The run's pixel contract as its record reads; nothing for a run that records none this edgeflow reads."""
    from pipeline.errors import ManifestError

    try:
        return run.contract.as_record()
    except ManifestError:
        return {}


def _numbers_in(models: Dict[str, dict]) -> List[str]:
    keys: List[str] = []
    for m in models.values():
        keys += [key for key, value in m.items() if _is_number(value) and key not in keys]
    return keys


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _present(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None and v != ""}


def _digest_prefix(digest: Optional[str]) -> Optional[str]:
    """The first 16 hex digits of a sha256: enough to tell two data sets apart on the page."""
    return digest[:16] if digest else None


def _data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _fixed(value: Any, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _signed(value: Any, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


def _thousands(value: Any) -> str:
    return "n/a" if value is None else f"{int(value):,}"


def _general(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


FILTERS = {"fixed": _fixed, "signed": _signed, "thousands": _thousands, "general": _general}
