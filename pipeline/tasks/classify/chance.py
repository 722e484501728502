"""Chance level: how often always answering the held-out set's most frequent class is right.

A classifier no better than that has learned nothing that carries over to new images, whatever its
training accuracy. `pipeline train` warns when it ends there; `pipeline parity` refuses such a
model (the gate's floor, pipeline/gate.py). Counted in images, as the gate counts: 15 of 60 is 15 of 60.
"""
from __future__ import annotations

import sys
from fractions import Fraction
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from pipeline.gate import FloorWords


class Majority(NamedTuple):
    """A classifier's chance: always answering the most frequent held-out class (the gate's Floor words it so)."""

    label: int  # the most frequent class (the lowest id among equals)
    name: str
    count: int  # its held-out images: what always answering it gets right
    images: int

    words = FloorWords("majority", "always answering the most frequent held-out class",
                       "better than always answering the majority class")

    @property
    def rate(self) -> float:
        return self.count / self.images

    @property
    def exact(self) -> Fraction:
        """The top-1 accuracy a model must beat, counted in images."""
        return Fraction(self.count, self.images)

    def brief(self) -> str:
        return f"majority class {self.name!r}"

    def describe(self) -> str:
        return f"{self.rate:.4f} ({self.count} of {self.images} images, always answering {self.name!r})"

    def as_dict(self) -> Dict[str, object]:
        return {"class": self.name, "label": self.label, "correct": self.count, "images": self.images, "rate": self.rate}


def majority(labels: Sequence[int], names: Sequence[str]) -> Majority:
    counts = np.bincount(np.asarray(labels, np.int64), minlength=len(names))
    label = int(counts.argmax())
    return Majority(label, names[label], int(counts[label]), int(counts.sum()))


def warn_if_stuck(history: List[dict], heldout_accuracy: float, chance: Majority, pretrained: bool) -> Optional[str]:
    """Say (on stderr) when held-out accuracy ended no better than chance while training accuracy rose."""
    correct = round(heldout_accuracy * chance.images)
    train = [entry["accuracy"] for entry in history if "accuracy" in entry]
    rose = bool(train) and train[-1] > chance.rate and (len(train) == 1 or train[-1] > train[0])
    if correct > chance.count or not rose:
        return None
    causes = ("BatchNorm statistics that do not fit the trained weights (the manifest's training.batchnorm says "
              "how they were obtained)")
    causes += ("; or a data set too small or too different for the pretrained weights" if pretrained else
               "; or no pretrained weights for a data set this small (--weights imagenet, with --frozen-epochs N)")
    message = (f"warning: held-out accuracy {heldout_accuracy:.4f} ({correct} of {chance.images} images) is no better "
               f"than always answering the most frequent held-out class, {chance.describe()}, while training accuracy "
               f"rose from {train[0]:.4f} to {train[-1]:.4f}: the model learned nothing that carries over to new images. "
               f"Likely causes: {causes}.")
    print(message, file=sys.stderr, flush=True)
    return message
