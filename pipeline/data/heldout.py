"""The run's held-out examples as stored, for everything that compares models on them: parity and its bundle."""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

from pipeline.data.examples import Example
from pipeline.data.identity import resolve_split
from pipeline.data.seen import check_unseen
from pipeline.errors import DataError
from pipeline.rundir.run import Run


class Heldout(NamedTuple):
    examples: List[Example]  # identity, label and digest of each held-out image, in order
    originals: List[Any]  # each as stored: encoded bytes, or uint8 pixels for array data sets
    size: int  # the model's input size
    checked: Optional[dict] = None  # a given set (`spec`): which images of the run's were looked for in it (seen.py)


def heldout_examples(run: Run, spec: Optional[str] = None) -> Heldout:
    """The run's held-out examples as stored, after checking they are the ones training recorded; or those of `spec`,
    refused when the run trained or tuned on any of them (by content)."""
    source, indices = resolve_split(run, "heldout", spec)
    if len(indices) == 0:
        raise DataError("the held-out split is empty; expected at least one image to compare on")
    examples = [source.examples[i] for i in indices]
    checked = None
    if spec is not None:
        checked = check_unseen(run, examples, spec, lambda: _training_examples(run))
    return Heldout(examples, source.originals(indices), run.image_size, checked)


def _training_examples(run: Run) -> List[Example]:
    """The training examples read again, checked against the summary training recorded (a DataError otherwise)."""
    source, indices = resolve_split(run, "train")
    return [source.examples[i] for i in indices]
