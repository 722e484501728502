"""The lines `pipeline run` ends with: the held-out scores, the parity models, the Edge TPU mapping, the
remedy chosen and where the run's files are. Each task's `end_summary` picks the parts that fit it."""
from __future__ import annotations

import json
from typing import List, Optional

from pipeline.gate import GATED, REFERENCE
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


def parity(run: Run) -> List[str]:
    """What a user wants at the end of a classification run: accuracies, agreement, Edge TPU mapping, sizes,
    where things are."""
    from pipeline.inference.parity_report import worst_client

    models = run.parity
    lines = ["", "== summary"]
    for name in (REFERENCE, *GATED):
        if name in models:
            lines.append(f"{name:<18} top-1 {models[name]['top1']:.4f}  macro-F1 {models[name]['macro_f1']:.4f}  "
                         f"agreement with float {models[name]['agreement']:.4f}")
    for name, c in models.get("clients", {}).items():
        if "refused" in c:
            lines.append(f"{'int8 as ' + name:<18} cannot feed the model: {c['refused']}")
        else:
            lines.append(f"{'int8 as ' + name:<18} top-1 {c['top1']:.4f}  macro-F1 {c['macro_f1']:.4f}  "
                         f"agreement with float {c['agreement']:.4f}{'  (gated)' if c['gated'] else ''}")
    worst = worst_client(models.get("clients", {}))
    if worst:
        lines.append(worst)
    edgetpu = edgetpu_mapping(run)
    if edgetpu:
        lines.append(f"edge tpu           {edgetpu}")
    for key in ("model_float", "model_int8", "model_int8_edgetpu"):
        if run.has(key):
            path = run.artifact(key)
            lines.append(f"{key:<18} {path.stat().st_size / 1024:8.1f} KiB  {path}")
    lines += remedy(run)
    lines.append(f"parity report      {run.dir / 'parity' / 'report.md'}")
    lines.append(gate(models.get("passed"), models.get("failures", [])))
    if run.path("report").exists():
        lines.append(f"report             {run.path('report')} (one page with all of the above; open it in a browser)")
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
