"""The cost model's prediction beside what `edge bench` measured on a device: how far the prediction was.

    edge bench model_int8_edgetpu.tflite --edgetpu --json bench.json     (on the device)
    pipeline parity RUN --device-results bench.json                      (here; or pipeline report RUN --latency bench.json)

The prediction is the one `pipeline compile` recorded in RUN/edgetpu.json (with the cost model's version). Only a
measurement of the run's compiled model on an Edge TPU is compared with it, one row per device the model predicts,
since the latency document does not say which Coral it ran on; a measurement on a CPU interpreter (the int8 model, or
any model without the Edge TPU) is shown beside the prediction but is not an error of it. `edge bench` times Python's
invoke, which Coral's figures (the cost model's ground truth) do not include, so a measurement above the prediction
by a fixed fraction of a millisecond is expected.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional


def on_edgetpu(bench: Dict[str, Any], measured_key: Optional[str]) -> bool:
    """The measurement is of the run's compiled model, run by the Edge TPU (an uncompiled model runs on the CPU even
    with the Edge TPU's delegate loaded)."""
    return bool(bench.get("edgetpu")) and bool(measured_key) and "edgetpu" in str(measured_key)


def measured_on(bench: Dict[str, Any], measured_key: Optional[str]) -> str:
    """Which device measured it, in words: the Edge TPU, or the CPU interpreter, with the machine and backend."""
    machine = bench.get("machine") or "an unnamed machine"
    where = "the Edge TPU" if on_edgetpu(bench, measured_key) else "the CPU interpreter"
    return f"{where} ({bench.get('backend')} on {machine})"


def beside(bench: Dict[str, Any], edgetpu_report: Optional[Dict[str, Any]], measured_key: Optional[str]) -> Optional[dict]:
    """{'version', 'comparable', 'measured_on', 'rows': [{device, label, predicted_ms, measured_ms, error_percent}]}
    or None when no prediction is recorded. `error_percent` is None unless the measurement is comparable (the run's
    compiled model on an Edge TPU)."""
    cost = (edgetpu_report or {}).get("cost")
    if not cost:
        return None
    comparable = on_edgetpu(bench, measured_key)
    measured = float(bench["median_ms"])
    rows: List[dict] = []
    for device, t in cost["devices"].items():
        predicted = float(t["total_ms"])
        error = 100 * (predicted / measured - 1) if comparable and measured > 0 else None
        rows.append({"device": device, "label": t["label"], "predicted_ms": predicted, "measured_ms": measured,
                     "error_percent": error})
    return {"version": cost.get("cost_model_version"), "comparable": comparable,
            "measured_on": measured_on(bench, measured_key), "model": measured_key, "rows": rows}


def line(compared: Optional[dict], bench: Dict[str, Any]) -> str:
    """The comparison in one line, naming the device that measured it."""
    measured = f"measured {float(bench['median_ms']):.2f} ms per inference"
    if compared is None:
        return (f"{measured} ({bench.get('backend')}, {'Edge TPU' if bench.get('edgetpu') else 'CPU'}); no prediction "
                "recorded beside it: run `pipeline compile RUN --check-only` first")
    model = f" of {compared['model']}" if compared.get("model") else ""
    where = f"{measured}{model} on {compared['measured_on']}"
    if compared["comparable"]:
        parts = [f"{r['label']} {r['predicted_ms']:.2f} ms ({r['error_percent']:+.1f}%)" for r in compared["rows"]]
        return (f"{where}; the cost model {compared['version']} predicted {', '.join(parts)} (the measurement does not say "
                "which Coral it ran on)")
    parts = [f"{r['label']} {r['predicted_ms']:.2f} ms" for r in compared["rows"]]
    return (f"{where}: a CPU time, not compared with the Edge TPU prediction (cost model {compared['version']}: "
            f"{', '.join(parts)}); `edge bench` of the compiled model with --edgetpu, on a Coral, measures what it predicts")
