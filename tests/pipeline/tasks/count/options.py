"""The count task's own command-line option: how far off a count may be and still be right (parity)."""
from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.tasks.options import Option

TRAIN_DEFAULTS = {"batch_size": 16, "epochs": 2}  # a tiny model on 77 pictures
# The words the commands' help texts take from each task (pipeline/tasks/options.py's said).
DATA_HELP = "squares"
LEARNS = "how many squares"
GATE_HELP = {"metric": "counts within --count-tolerance", "floor": "better than always answering the mean count",
             "agreement": "the share of counts equal to the float model's", "clients": "none"}
OPTIONS = {"parity": (Option("--count-tolerance", "tolerance", "count: how far an answer may be from the true count and "
                             "still be right (default 0.5)", float, default=0.5),)}


def check(command: str, given: dict) -> None:
    if given.get("tolerance", 0.5) <= 0:
        raise ConfigError(f"--count-tolerance {given['tolerance']}, expected a positive number")
