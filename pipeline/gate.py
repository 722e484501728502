"""The parity gate's limits and their defaults, in one place (parity, `pipeline run` and the CLI read them)."""
from __future__ import annotations

from typing import NamedTuple

GATE_METRICS = ("top1", "macro_f1")  # what --max-drop limits: top-1 accuracy, or macro-F1 x 100


class GateLimits(NamedTuple):
    max_drop: float  # percentage points of the gate metric a gated model may lose against float
    min_agreement: float  # share of images whose top-1 must match the float model's
    metric: str  # one of GATE_METRICS


GATE = GateLimits(max_drop=1.0, min_agreement=0.98, metric="top1")
