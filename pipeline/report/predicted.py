"""The cost model's prediction beside what `edge bench` measured on a device: how far the prediction was.

    edge bench model_int8_edgetpu.tflite --edgetpu --json bench.json     (on the device)
    pipeline report RUN --latency bench.json                             (here)

The prediction is the one `pipeline compile` recorded in RUN/edgetpu.json (with the cost model's version); it is
shown for a measurement of the run's compiled model on the Edge TPU, one row per device the model predicts, since the
latency document does not say which Coral it ran on. `edge bench` times Python's invoke, which Coral's figures (the
cost model's ground truth) do not include, so a measurement above the prediction by a fixed fraction of a
millisecond is expected.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional


def beside(bench: Dict[str, Any], edgetpu_report: Optional[Dict[str, Any]], measured_key: Optional[str]) -> Optional[dict]:
    """{'version', 'rows': [{device, label, predicted_ms, measured_ms, error}]} or None when there is nothing to compare:
    no prediction recorded, or the measurement is not of the run's compiled model on an Edge TPU."""
    cost = (edgetpu_report or {}).get("cost")
    if not cost or not bench.get("edgetpu") or not measured_key or "edgetpu" not in measured_key:
        return None
    measured = float(bench["median_ms"])
    rows: List[dict] = []
    for device, t in cost["devices"].items():
        predicted = float(t["total_ms"])
        rows.append({"device": device, "label": t["label"], "predicted_ms": predicted, "measured_ms": measured,
                     "error_percent": 100 * (predicted / measured - 1) if measured > 0 else None})
    return {"version": cost.get("cost_model_version"), "rows": rows}
