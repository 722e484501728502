"""Each task's own defaults for `pipeline train` options it does not share with TrainConfig's (written once here,
TensorFlow-free, so `pipeline train --help` shows them without importing the tasks): TrainConfig fields, and
"schedule" for the learning-rate schedule's fields."""
from __future__ import annotations

from typing import Any, Dict

TRAIN_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "classify": {},  # TrainConfig's own defaults are the classifier's
    "detect": {"batch_size": 16, "epochs": 12,
               "schedule": {"start": 1e-3, "max": 4e-3, "warmup_epochs": 1, "sustain_epochs": 2, "decay": 0.7}},
}
