"""The run's held-out examples as stored, for everything that compares models on them: parity and its bundle."""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

from pipeline.data.examples import Example
from pipeline.data.identity import resolve_split
from pipeline.errors import DataError
from pipeline.rundir.run import Run


class Heldout(NamedTuple):
    examples: List[Example]  # identity, label and digest of each held-out image, in order
    originals: List[Any]  # each as stored: encoded bytes, or uint8 pixels for array data sets
    size: int  # the model's input size


def heldout_examples(run: Run, spec: Optional[str] = None) -> Heldout:
    """The run's held-out examples as stored (or those of `spec`), after checking they are the ones training recorded."""
    source, indices = resolve_split(run, "heldout", spec)
    if len(indices) == 0:
        raise DataError("the held-out split is empty; expected at least one image to compare on")
    return Heldout([source.examples[i] for i in indices], source.originals(indices), run.image_size)
