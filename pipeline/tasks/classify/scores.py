"""Classification's gate metrics, and a classifier's parity entry as the gate sees it (pipeline/gate.py).

    scores = {name: gate_scores(entry) for name, entry in models.items()}
    failures = gate.check(scores, limits, METRICS, Floor(majority(labels, names), limits.min_accuracy, METRICS["top1"]))
"""
from __future__ import annotations

from typing import Any, Dict, Mapping

from pipeline.gate import AGREEMENT, Metric, Score

# Classification's metrics; --gate-metric chooses the one --max-drop limits.
METRICS = {m.key: m for m in (Metric("top1", "accuracy", "top-1"), Metric("macro_f1", "macro-F1", "macro-F1"))}
GATE_METRICS = tuple(METRICS)


def gate_scores(entry: Mapping[str, Any]) -> Dict[str, Score]:
    """A classifier's parity model entry (pipeline/tasks/classify/parity.py) as the gate sees it: top-1 and agreement
    counted in images, and macro-F1 exactly from the per-class counts (with --max-drop 1, 0.90 -> 0.89 passes and
    0.90 -> 0.8899 fails)."""
    from edge.answers.metrics import counts_of, macro_f1_exact

    return {"top1": Score.counted(entry["correct"], entry["images"]),
            AGREEMENT: Score.counted(entry["agree"], entry["images"]),
            "macro_f1": Score(macro_f1_exact(counts_of(entry["per_class"])), entry["macro_f1"])}
