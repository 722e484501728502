"""The report's detection section: held-out COCO mAP, AP per class, and sample held-out images drawn with
their true boxes (green) and the detector's (red), from RUN/heldout_detections.json. A run without
detection scores has no such section (`applies` False)."""
from __future__ import annotations

import json

from pipeline.rundir.run import Run

KEY = "heldout_detections"


def section(run: Run) -> dict:
    metrics = run.metrics
    heldout = run.heldout_metrics
    if "map" not in heldout:
        return {"applies": False, "ran": False, "error": None}
    samples = []
    if run.has(KEY):
        document = json.loads(run.artifact(KEY).read_text())
        samples = [{"id": s["id"], "src": f"data:image/png;base64,{s['png']}"} for s in document.get("samples", [])]
    evaluation = metrics.get("evaluation") or {}
    parity = None
    if run.has("parity_report"):
        report = json.loads(run.artifact("parity_report").read_text())
        if report.get("task") == "detect":
            parity = {"models": report["models"], "gate": report["gate"], "agreement": report.get("agreement") or {}}
    return {
        "applies": True, "ran": True, "error": None,
        "map": heldout.get("map"), "map50": heldout.get("map50"), "images": heldout.get("images"),
        "objects": heldout.get("objects"),
        "per_class": [{"label": k, "ap": v} for k, v in (metrics.get("heldout_per_class") or {}).items()],
        "nms": evaluation.get("nms") or {}, "evaluator": evaluation.get("evaluator"),
        "samples": samples, "parity": parity,
    }
