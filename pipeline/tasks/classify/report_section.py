"""A classifier's parity section of report.html: every model side by side, the gate, confusion matrices, per-class
deltas, the images that differ (pipeline/report/sections.py's skeleton asks for it through Task.report_sections)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

from pipeline.gate import GATED
from pipeline.inference.parity_report import worst_client
from pipeline.report import plots
from pipeline.report.sections import _data_uri, _not_run, _numbers_in
from pipeline.rundir.run import Run
from pipeline.tasks.classify import disagreements
from pipeline.tasks.classify.report import WORST
from pipeline.tasks.classify.scores import METRICS

# Numbers parity/report.json gives every model today (pipeline/tasks/classify/parity.py `compare`): the table shows
# them, or what they add up to, in its own columns. Any other number gets a column named by its key.
_PARITY_KNOWN = ("images", "correct", "agree", "drop_images", "top1", "agreement", "drop_pp", "score_error_mean",
                 "score_error_max")



def parity_section(run: Run) -> dict:
    """Every model side by side, the gate, confusion matrices, per-class deltas, the images that differ."""
    if not run.has("parity_report"):
        return _not_run("parity")
    path = run.artifact("parity_report")
    report = json.loads(path.read_text())
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
    glance = [(f"top-1, {report['reference']}", models[report["reference"]]["top1"])]
    for name in (n for n in GATED if n in models):
        glance += [(f"top-1, {name}", models[name]["top1"]), (f"agreement, {name}", models[name]["agreement"])]
    return {
        "ran": True, "error": None, "glance": glance,
        "heldout": report["heldout"], "reference": report["reference"], "k": k, "labels": labels,
        "models": models, "extra": extra, "gate": report["gate"], "device": report.get("device"),
        # What the gate's --max-drop limited (a report from before --gate-metric limited top-1).
        "gate_metric": METRICS[report["gate"].get("metric", "top1")].short,
        "per_class": per_class, "compared": compared,
        "confusions": {name: plots.confusion(m["confusion"], labels, f"{name}: top-1 {m['top1']:.4f}") for name, m in models.items()},
        "deltas_plot": plots.class_deltas(labels, {m: models[m]["per_class_delta_pp"] for m in compared}) if compared else None,
        "disagreements": _disagreements(path.parent, report.get("disagreements"), labels),
        # The int8 model as each client feeds it (a report from before the clients has none).
        "clients": report.get("clients") or {}, "worst_client": worst_client(report.get("clients") or {}, WORST),
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
