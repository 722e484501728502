"""The lines `pipeline run` ends with for a classifier: accuracies, agreement, the clients, the Edge TPU mapping, sizes,
where things are (the shared parts from pipeline/inference/summary.py)."""
from __future__ import annotations

from typing import List

from pipeline.gate import GATED, REFERENCE
from pipeline.inference.parity_report import worst_client
from pipeline.inference.summary import edgetpu_mapping, gate, remedy
from pipeline.rundir.run import Run
from pipeline.tasks.classify.report import WORST


def parity(run: Run) -> List[str]:
    """What a user wants at the end of a classification run: accuracies, agreement, Edge TPU mapping, sizes,
    where things are."""
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
    worst = worst_client(models.get("clients", {}), WORST)
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
