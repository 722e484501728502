"""The rungs of the remedy ladder, one module each; pipeline/remedy/ladder.py climbs them in order of cost.

A rung is a small function of the user's export config and the tuning split returning another export config, or
`Skip` when it does not apply (why, in one line). The export stage's own `convert` makes its model. The rungs: a
larger calibration set (calibration.py); cross-layer equalization, bias correction and activation ranges chosen to
minimise int8 error, weight edits on a copy of the float model (equalize.py, bias.py, ranges.py over
pipeline/remedy/float_edits.py); per-channel weights (per_channel.py); a few epochs of QAT that learns the float
model's own scores (distillation: the gate measures agreement with float), then a few that learn the labels
(fine_tuning.py over pipeline/quant/qat.py).
"""
from __future__ import annotations

from typing import Callable, NamedTuple


class Rung(NamedTuple):
    name: str
    what: str  # one line for the table and the report
    config: Callable  # (the user's config, tuning split) -> an export config, or Skip: it does not apply


class Skip(NamedTuple):
    """A rung that does not apply to this export, and why (one line for the table and the manifest)."""

    why: str
