"""Each task's own defaults for `pipeline train` options it does not share with TrainConfig's: TrainConfig fields,
and "schedule" for the learning-rate schedule's fields. A task writes them once, as TRAIN_DEFAULTS in its options.py
(TensorFlow-free, so `pipeline train --help` shows them without importing the tasks)."""
from __future__ import annotations

from typing import Any, Dict

from pipeline import tasks


def of_task(name: str) -> Dict[str, Any]:
    """Task `name`'s train defaults ({}: TrainConfig's own are its)."""
    module = tasks.part(name, "options")
    return dict(getattr(module, "TRAIN_DEFAULTS", {})) if module is not None else {}


TRAIN_DEFAULTS: Dict[str, Dict[str, Any]] = {name: of_task(name) for name in tasks.NAMES}  # the tasks found here
