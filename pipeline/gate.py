"""The parity gate's limits and their defaults, in one place (parity, `pipeline run` and the CLI read them)."""
from __future__ import annotations

from typing import NamedTuple


class GateLimits(NamedTuple):
    max_drop: float  # percentage points of top-1 accuracy a gated model may lose against float
    min_agreement: float  # share of images whose top-1 must match the float model's


GATE = GateLimits(max_drop=1.0, min_agreement=0.98)
