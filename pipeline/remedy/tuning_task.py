"""The remedy ladder's view of a task (`Task.tuning()` hands it to the export stage), so that the ladder and its rungs
are one for every task: the task draws the tuning split, scores the reference and a candidate on it, turns them into
the gate's named scores (pipeline/gate.py), reads the user's limits as its own gate does, and names the rungs that do
not apply to it and why. Each task's is in its own folder (pipeline/tasks/<task>/tuning.py).
"""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple, Optional

from pipeline import gate


class TuningTask(NamedTuple):
    metrics: Mapping[str, gate.Metric]  # the gate's named metrics for this task
    split: Callable  # (run, seed) -> TuningSplit
    reference: Callable  # (run, TuningSplit) -> the reference model's outputs
    candidate: Callable  # (model bytes, TuningSplit, PixelContract) -> the candidate's outputs
    scores: Callable  # (outputs, reference outputs, TuningSplit, class names) -> {metric key: gate.Score}
    limits: Callable = lambda limits: limits  # the user's GateLimits as this task's parity gate applies them
    not_applicable: Mapping[str, str] = {}  # rung name -> why it does not apply to this task (recorded as skipped)
    # (model bytes, TuningSplit, PixelContract, client names) -> ({client: uint8 pixels [n,S,S,3]}, {client: why not}):
    # what each client hands a model whose input takes the camera bytes as they are; None: not judged on the split
    clients: Optional[Callable] = None
    # (outputs, reference outputs, TuningSplit, class names, gate metric) -> the standard deviation (pp) of the drop
    # over the tuning images resampled: how well a set-aside split of these few images can judge --max-drop
    spread: Optional[Callable] = None
