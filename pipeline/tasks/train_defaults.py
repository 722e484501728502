"""Each task's own defaults for `pipeline train`, by task (tasks.train_defaults_of: TRAIN_DEFAULTS of its options.py)."""
from __future__ import annotations

from typing import Any, Dict

from pipeline import tasks

TRAIN_DEFAULTS: Dict[str, Dict[str, Any]] = {name: tasks.train_defaults_of(name) for name in tasks.NAMES}  # those found here
