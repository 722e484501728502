"""Pose's own command-line options: --max-boxes (train), as detection's (the flag is shown once, with detection's help)."""
from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.tasks.options import Option

# `pipeline train`'s defaults of a pose model: detection's batch and schedule (pipeline/tasks/detect/options.py, measured
# on `shapes`); the epochs are not measured on pose data yet (a first choice: detection's 12 did not fit keypoints too).
TRAIN_DEFAULTS = {"batch_size": 16, "epochs": 20,
                  "schedule": {"start": 1e-3, "max": 4e-3, "warmup_epochs": 1, "sustain_epochs": 2, "decay": 0.8}}
MAX_BOXES = 16  # the built-in figures hold at most 3; COCO's person images rarely more than 13 labelled people

OPTIONS = {
    "train": (Option("--max-boxes", "max_boxes", "pose: most objects one image may hold (default 16); every image's "
                     "boxes and keypoints are padded to it", int, default=MAX_BOXES, show_default=True),),
}


def check(command: str, given: dict) -> None:
    value = given.get("max_boxes")
    if value is not None and not (isinstance(value, int) and not isinstance(value, bool)):
        raise ConfigError(f"max_boxes {value!r}, expected a whole number")
    if value is not None and value < 1:
        raise ConfigError(f"max_boxes {value}, expected at least 1")
