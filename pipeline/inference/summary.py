"""The lines `pipeline run` ends with: the held-out scores, the parity models, the Edge TPU mapping, the
remedy chosen and where the run's files are. Each task's `end_summary` picks the parts that fit it and words its
own scores (a classifier's: pipeline/tasks/classify/summary.py)."""
from __future__ import annotations

import json
from typing import List, Optional

from pipeline.rundir.run import Run


def trained(run: Run) -> List[str]:
    """The held-out scores training recorded, and where the run's files are."""
    heldout = run.heldout_metrics
    shown = "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in heldout.items() if v is not None)
    lines = ["", "== summary", f"held-out           {shown}"]
    edgetpu = edgetpu_mapping(run)
    if edgetpu:
        lines.append(f"edge tpu           {edgetpu}")
    for key in ("saved_model", "heldout_detections", "model_float", "model_int8", "model_int8_edgetpu"):
        if run.has(key):
            path = run.path(key)
            size = f"{path.stat().st_size / 1024:8.1f} KiB  " if path.is_file() else ""
            lines.append(f"{key:<18} {size}{path}")
    lines += remedy(run)
    report = run.path("report")
    if report.exists():
        lines.append(f"report             {report} (open it in a browser)")
    return lines


def gate(passed: bool, failures) -> str:
    return f"gate               {'passed' if passed else 'FAILED: ' + '; '.join(failures)}"


def remedy(run: Run) -> List[str]:
    """The remedy ladder's choice, when the int8 export ran it."""
    record = run.remedy
    if not record:
        return []
    return [f"remedy             {record['chosen']} ("
            + ("passed" if record["passed"] else "best of those tried; none passed") + " on the tuning split; tried "
            + ", ".join(a["remedy"] for a in record["attempts"]) + ")"]


def edgetpu_mapping(run: Run) -> Optional[str]:
    if not run.has("edgetpu_report"):
        return None
    report = json.loads(run.artifact("edgetpu_report").read_text())
    pre = report.get("preflight", {})
    text = f"pre-flight: {pre.get('ops_on_edgetpu')}/{pre.get('total_ops')} ops predicted on the Edge TPU"
    if report.get("compiler"):
        c = report["compiler"]
        text += f"; compiler: {c.get('ops_on_edgetpu')} on the Edge TPU, {c.get('ops_on_cpu')} on the CPU"
    advice = pre.get("advice")  # the pre-flight's changes, first fallback first (none in a report from before them)
    if advice:
        text += f"; first change: {advice[0]['heading']}: {advice[0]['advice']}"
    return text
