"""The count task's own command-line option: how far off a count may be and still be right (parity)."""
from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.tasks.options import Option

TRAIN_DEFAULTS = {"batch_size": 16, "epochs": 2}  # a tiny model on 77 pictures
OPTIONS = {"parity": (Option("--count-tolerance", "tolerance", "count: how far an answer may be from the true count and "
                             "still be right (default 0.5)", float, default=0.5),)}


def check(command: str, given: dict) -> None:
    if given.get("tolerance", 0.5) <= 0:
        raise ConfigError(f"--count-tolerance {given['tolerance']}, expected a positive number")
