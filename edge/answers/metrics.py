"""Per-class precision, recall and F1, and macro-F1, of top-1 answers: one implementation for the device
(`edge evaluate`) and the host (`pipeline train`, `pipeline parity`). numpy and the standard library only.

    from edge.answers.metrics import class_report
    class_report(truth=[0, 1, 2, 2], predicted=[0, 2, 2, 2], num_classes=4)["macro_f1"]   # 0.6

The definitions are scikit-learn's (`precision_recall_fscore_support`, and `f1_score(average="macro")`
with its default labels), the metric Kaggle's flower competition scores:
  precision_c = tp / (tp + fp)    recall_c = tp / (tp + fn)    F1_c = 2 tp / (2 tp + fp + fn)
- A 0/0 precision (a class in the truth that is never predicted) or recall (a class predicted but
  absent from the truth) is 0: scikit-learn's zero_division default ("warn", which gives 0).
- A class absent from both the truth and the predictions has no precision, recall or F1 (None) and is
  left out of the macro average, as scikit-learn leaves it out when no labels are given. A class that
  is predicted but absent from the truth has F1 0 and is averaged.
The counts stay integers, and `macro_f1_exact` gives the macro-F1 as a fraction, so a gate on it
counts exactly, as the top-1 gate counts images.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from edge.errors import InputError


class ClassCounts(NamedTuple):
    """Per class, indexed by class id: true positives, false positives, false negatives."""

    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray

    @property
    def support(self) -> np.ndarray:
        return self.tp + self.fn  # examples of the class in the truth

    @property
    def occurring(self) -> np.ndarray:
        """True for the classes in the truth or in the predictions: the ones macro-F1 averages."""
        return (self.tp + self.fp + self.fn) > 0


def class_counts(truth: Sequence[int], predicted: Sequence[int], num_classes: int) -> ClassCounts:
    """tp, fp and fn of every class 0..num_classes-1 from parallel lists of true and predicted class ids."""
    t = np.asarray(truth, dtype=np.int64).reshape(-1)
    p = np.asarray(predicted, dtype=np.int64).reshape(-1)
    if t.shape != p.shape:
        raise InputError(f"{t.size} true labels and {p.size} predictions; expected one prediction per label")
    for name, values in (("true label", t), ("predicted class", p)):
        if values.size and (values.min() < 0 or values.max() >= num_classes):
            bad = values[(values < 0) | (values >= num_classes)][0]
            raise InputError(f"{name} {bad}, expected a class id in 0..{num_classes - 1}")
    tp = np.bincount(t[t == p], minlength=num_classes)
    fp = np.bincount(p[t != p], minlength=num_classes)
    fn = np.bincount(t[t != p], minlength=num_classes)
    return ClassCounts(tp, fp, fn)


def f1_exact(counts: ClassCounts) -> List[Optional[Fraction]]:
    """Each class's F1 as a fraction; None for a class absent from truth and predictions."""
    return [Fraction(2 * int(tp), 2 * int(tp) + int(fp) + int(fn)) if tp + fp + fn else None
            for tp, fp, fn in zip(counts.tp, counts.fp, counts.fn)]


def macro_f1_exact(counts: ClassCounts) -> Optional[Fraction]:
    """The mean F1 of the occurring classes as a fraction; None when no class occurs (no examples)."""
    f1 = [f for f in f1_exact(counts) if f is not None]
    return sum(f1, Fraction(0)) / len(f1) if f1 else None


def _ratio(num: np.ndarray, den: np.ndarray, occurring: np.ndarray) -> List[Optional[float]]:
    # float64 division of the integer counts, as scikit-learn divides them; 0/0 is 0 (its zero_division default).
    out = np.divide(num, den, out=np.zeros(num.shape, np.float64), where=den > 0)
    return [float(v) if o else None for v, o in zip(out, occurring)]


def class_report(truth: Sequence[int], predicted: Sequence[int], num_classes: int) -> Dict[str, Any]:
    """Per-class precision, recall, F1, support and counts (lists indexed by class id), and macro-F1.

    JSON-ready. The floats are computed as scikit-learn computes them (macro-F1 is numpy's mean of
    the per-class F1s), so they equal its numbers exactly; `macro_f1_exact` is the gate's number.
    """
    counts = class_counts(truth, predicted, num_classes)
    occurring = counts.occurring
    f1 = _ratio(2 * counts.tp, 2 * counts.tp + counts.fp + counts.fn, occurring)
    averaged = np.array([v for v in f1 if v is not None], np.float64)
    return {
        "macro_f1": float(averaged.mean()) if averaged.size else None,
        "classes_averaged": int(averaged.size),  # classes in the truth or the predictions
        "precision": _ratio(counts.tp, counts.tp + counts.fp, occurring),
        "recall": _ratio(counts.tp, counts.support, occurring),
        "f1": f1,
        "support": counts.support.tolist(),
        "tp": counts.tp.tolist(),
        "fp": counts.fp.tolist(),
        "fn": counts.fn.tolist(),
    }


def counts_of(report: Dict[str, Any]) -> ClassCounts:
    """The counts a `class_report` holds, back as arrays (for the exact macro-F1 of a written report)."""
    return ClassCounts(*(np.asarray(report[key], np.int64) for key in ("tp", "fp", "fn")))
