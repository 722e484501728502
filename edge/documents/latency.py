"""The latency document: what `edge bench` timed on a device, carried to the run's report.

    edge bench MODEL --json bench.json              (writes it: `latency_document`)
    pipeline report RUN --latency bench.json        (reads it: `read_latency`, then keeps it as RUN/latency.json)

    {"schema_version": 1, "model": "<file name>", "model_sha256": "<hex>", "backend": "...", "edgetpu": bool,
     "threads": n | null, "runs": n, "first_invoke_ms": ..., "median_ms": ..., "p90_ms": ...,
     "end_to_end_images": n, "end_to_end_images_per_s": ... | null, "machine": "...", "python": "..."}
"""
from __future__ import annotations

import platform
from pathlib import Path
from typing import Any, Dict, Optional

from edge.documents.schema import load
from edge.errors import InputError

SCHEMA_VERSION = 1
_EXPECTED = "the JSON written by `edge bench MODEL --json FILE`"
# What the report shows; every other field is kept as written.
_REQUIRED = {"model": str, "model_sha256": str, "backend": str, "runs": int, "first_invoke_ms": float, "median_ms": float,
             "p90_ms": float}


def latency_document(model_name: str, model_sha256: Optional[str], backend: str, edgetpu: bool, threads: Optional[int],
                     runs: int, first_invoke_ms: float, median_ms: float, p90_ms: float, end_to_end_images: int,
                     end_to_end_images_per_s: Optional[float]) -> Dict[str, Any]:
    """The document for one `edge bench`, with the machine and Python it ran on."""
    return {"schema_version": SCHEMA_VERSION, "model": model_name, "model_sha256": model_sha256, "backend": backend,
            "edgetpu": edgetpu, "threads": threads, "runs": runs, "first_invoke_ms": first_invoke_ms, "median_ms": median_ms,
            "p90_ms": p90_ms, "end_to_end_images": end_to_end_images, "end_to_end_images_per_s": end_to_end_images_per_s,
            "machine": platform.machine(), "python": platform.python_version()}


def read_latency(path: Path) -> Dict[str, Any]:
    """The document at `path`, checked: its version and the fields the report shows."""
    document = load(path, "latency file", SCHEMA_VERSION, InputError, _EXPECTED)
    for key, kind in _REQUIRED.items():
        value = document.get(key)
        if not isinstance(value, (int, float) if kind is float else kind) or isinstance(value, bool):
            raise InputError(f"latency file {path}: {key!r} is {value!r}; expected {kind.__name__} ({_EXPECTED})")
    return document
