"""The report's detection section: held-out COCO mAP, AP per class, and sample held-out images drawn with
their true boxes (green) and the detector's (red), from RUN/heldout_detections.json; after parity, each
model's precision-recall curve at IoU 0.5, the int8 model as each client feeds it and the held-out images where
int8 (or the device) and float disagree, and which held-out images parity compared them on. A run without
detection scores has no such section (`applies` False)."""
from __future__ import annotations

import json
from typing import Optional, Tuple

from pipeline.inference.parity_report import worst_client
from pipeline.rundir.run import Run
from pipeline.tasks.detect.drawn import DETECT_WORST

KEY = "heldout_detections"


def section(run: Run) -> dict:
    metrics = run.metrics
    heldout = run.heldout_metrics
    if "map" not in heldout:
        return {"applies": False, "ran": False, "error": None}
    samples, _ = drawn_samples(run, KEY)
    evaluation = metrics.get("evaluation") or {}
    parity = None
    report = task_parity(run, "detect")
    if report is not None:
        clients = report.get("clients") or {}  # a report from before the clients has none
        parity = {"models": report["models"], "gate": report["gate"], "agreement": report.get("agreement") or {},
                  "heldout": heldout_line(report),
                  "clients": clients, "worst_client": worst_client(clients, DETECT_WORST),
                  "pr_curves": pr_curves(report["models"]),
                  "disagreements": None if "disagreements" not in report else  # an older report: not recorded
                  [{**d, "src": f"data:image/png;base64,{d['png']}"} for d in report["disagreements"]]}
    return {
        "applies": True, "ran": True, "error": None,
        "map": heldout.get("map"), "map50": heldout.get("map50"), "images": heldout.get("images"),
        "objects": heldout.get("objects"),
        "per_class": [{"label": k, "ap": v} for k, v in (metrics.get("heldout_per_class") or {}).items()],
        "nms": evaluation.get("nms") or {}, "evaluator": evaluation.get("evaluator"),
        "samples": samples, "parity": parity,
        "glance": [("held-out mAP@.5 after training", heldout.get("map50")), ("held-out mAP@[.5:.95]", heldout.get("map"))],
        "remedy": run.remedy,  # `export --int8 --remedy`: every attempt of the ladder (a detector has no per-layer report)
    }


def drawn_samples(run: Run, key: str) -> Tuple[list, dict]:
    """(the drawn held-out images of the run's artifact `key` as the report shows them, the whole document); nothing
    when the run has no such artifact."""
    if not run.has(key):
        return [], {}
    document = json.loads(run.artifact(key).read_text())
    return [{"id": s["id"], "src": f"data:image/png;base64,{s['png']}"} for s in document.get("samples", [])], document


def task_parity(run: Run, task: str) -> Optional[dict]:
    """The run's parity report when parity has run and compared `task`'s models; None otherwise."""
    if not run.has("parity_report"):
        return None
    report = json.loads(run.artifact("parity_report").read_text())
    return report if report.get("task") == task else None


def pr_curves(models: dict):
    """One precision-recall curve at IoU 0.5 per model (COCOeval's 101 recall points) as an inline SVG; None when
    the parity report holds none (one written before the curves were recorded)."""
    import numpy as np

    from pipeline.report.plots import _figure, _svg

    curves = {name: m["precision_at_recall_50"] for name, m in models.items() if m.get("precision_at_recall_50")}
    if not curves:
        return None
    fig = _figure(5.5, 3.6)
    ax = fig.subplots()
    recall = np.linspace(0.0, 1.0, 101)
    for n, (name, curve) in enumerate(curves.items()):
        precision = np.array([np.nan if v is None else v for v in curve], float)
        ax.plot(recall[: len(precision)], precision, label=f"{name} (mAP@.5 {models[name]['map50']:.3f})",
                linestyle=("-", "--", ":", "-.")[n % 4])
    ax.set_xlabel("recall")
    ax.set_ylabel("precision (IoU 0.5, mean over classes)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    return _svg(fig)


def heldout_line(report: dict) -> str:
    """Which images parity compared the models on, and what was checked of them, in one line."""
    held = report.get("heldout") or {}  # a report from before it was recorded has none
    if not held:
        return f"held-out images: {report.get('images')}"
    line = f"held-out images: {held['images']} ({held['objects']} objects) from {held['source']}"
    if held["source"] != held.get("resolved"):
        line += f" ({held.get('resolved')})"
    if "trained_on_checked" not in held:
        return line
    if held["trained_on_checked"]:
        line += f"; none of them trained or tuned on, by content, checked against {held['checked_against']}"
    else:
        line += f"; NOT checked against the training images: {held['checked_against']}"
    if held.get("recorded_heldout"):
        line += f"; {held['recorded_heldout']} of them are the run's recorded held-out images"
    return line
