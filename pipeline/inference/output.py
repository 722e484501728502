"""What `pipeline predict` writes: a CSV in Kaggle's submission layout, or JSON with ids, names and scores.

CSV: header `id,label`, one row per input in input order, label = the top-1 class id. With --top-k K the
row goes on with the class name and score of the top-1 answer (`name,score`), then `label_2,name_2,score_2`
... up to K (Kaggle reads `id,label`; a submission is written without --top-k).
JSON: {"labels", "predictions": [{"id", "label", "name", "score", "top_k": [{"label", "name", "score"}, ...]}], ...}.
Ties between scores go to the lower class id, as edge's top_k orders them.
"""
from __future__ import annotations

import csv
import io
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

FORMATS = ("csv", "json")
SCHEMA_VERSION = 1  # of the JSON output


def ranked(scores: np.ndarray, k: int) -> np.ndarray:
    """Class ids [N, k] by descending score, ties to the lower id (a stable sort, as edge.answers.classify.top_k)."""
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def csv_text(ids: Sequence[str], scores: np.ndarray, labels: Sequence[str], top_k: Optional[int]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["id", "label"]
    if top_k:
        header += ["name", "score"] + [f"{col}_{r}" for r in range(2, top_k + 1) for col in ("label", "name", "score")]
    writer.writerow(header)
    order = ranked(scores, top_k or 1)
    for ident, row, best in zip(ids, scores, order):
        cells: List[Any] = [ident, int(best[0])]
        if top_k:
            for r, c in enumerate(best):
                cells += ([] if r == 0 else [int(c)]) + [labels[c], f"{row[c]:.6f}"]
        writer.writerow(cells)
    return out.getvalue()


def json_object(ids: Sequence[str], scores: np.ndarray, labels: Sequence[str], top_k: Optional[int],
                facts: Dict[str, Any]) -> Dict[str, Any]:
    k = top_k or 1
    predictions = []
    for ident, row, best in zip(ids, scores, ranked(scores, k)):
        ranks = [{"label": int(c), "name": labels[c], "score": float(row[c])} for c in best]
        predictions.append({"id": ident, **ranks[0], "top_k": ranks})
    return {"schema_version": SCHEMA_VERSION, **facts, "labels": list(labels), "top_k": k, "predictions": predictions}
