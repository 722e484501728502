"""Per-class precision, recall and F1, and macro-F1, where the stages report them: train's held-out
evaluation and parity's side-by-side comparison. The numbers come from edge.answers.metrics (one implementation,
shared with `edge evaluate`); this module only feeds it and lays out the results. The macro-F1 gate
(`pipeline parity --gate-metric macro_f1`) is the gate's (pipeline/gate.py), on the counts kept here.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from edge.answers.metrics import class_report


def heldout_labels(train_source, val_source, split) -> List[int]:
    """The held-out examples' labels in the order train's held-out dataset yields them."""
    if val_source is not None:
        return [e.label for e in val_source.examples]
    return [train_source.examples[i].label for i in train_source.indices("heldout", split)]


def heldout_report(model, heldout_ds, labels: Sequence[int], batch_size: int, num_classes: int) -> Dict[str, Any]:
    """One prediction pass over the held-out set (Keras' predict under the model's strategy, answers in
    input order) and the per-class report of the top-1 answers against `labels`."""
    from pipeline import data as data_mod
    from pipeline.errors import PipelineError

    steps = -(-len(labels) // batch_size)  # Keras cannot infer a dataset's length once steps_per_execution > 1
    scores = model.predict(data_mod.eval_pipeline(heldout_ds, batch_size), steps=steps, verbose=0)
    if len(scores) != len(labels):
        raise PipelineError(f"internal error: {len(scores)} held-out predictions for {len(labels)} held-out examples")
    return class_report(labels, np.argmax(scores, axis=1), num_classes)


def compared(top1: np.ndarray, reference_top1: np.ndarray, labels: np.ndarray, num_classes: int) -> Dict[str, Any]:
    """A parity model entry's per-class fields: its report, and its F1 against the reference's, per class and macro."""
    mine, ref = class_report(labels, top1, num_classes), class_report(labels, reference_top1, num_classes)
    return {
        "macro_f1": mine["macro_f1"],
        "macro_f1_drop_pp": (ref["macro_f1"] - mine["macro_f1"]) * 100,  # for people; the gate counts exactly (pipeline/gate.py)
        "per_class": mine,
        "per_class_f1_delta_pp": [None if a is None or b is None else (a - b) * 100 for a, b in zip(mine["f1"], ref["f1"])],
    }


def markdown(report: Dict[str, Any]) -> List[str]:
    """report.md's per-class F1 table: each model's F1, and its delta against the reference, per class."""
    models = report["models"]
    reference = report["reference"]
    others = [n for n in models if n != reference]
    lines = ["", "## Per-class F1 (scikit-learn's definition), and its delta against the float model (points of F1 x 100)", "",
             "| class | support | " + " | ".join(models) + " | " + " | ".join(f"Δ {n}" for n in others) + " |",
             "|---|---:|" + "---:|" * (len(models) + len(others))]
    for c, label in enumerate(report["labels"]):
        f1 = [_cell(m["per_class"]["f1"][c], "{:.3f}") for m in models.values()]
        deltas = [_cell(models[n]["per_class_f1_delta_pp"][c], "{:+.1f}") for n in others]
        lines.append(f"| {label} | {models[reference]['per_class']['support'][c]} | " + " | ".join(f1 + deltas) + " |")
    lines.append("| **macro-F1** | | " + " | ".join(_cell(m["macro_f1"], "{:.4f}") for m in models.values()) + " | "
                 + " | ".join(_cell(-models[n]["macro_f1_drop_pp"], "{:+.2f}") for n in others) + " |")
    lines += ["", "A class absent from both the truth and a model's answers has no F1 (n/a) and is not averaged; a 0/0 "
              "precision or recall counts as 0 (scikit-learn's zero_division default)."]
    return lines


def _cell(value: Optional[float], fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)
