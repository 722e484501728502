"""What later stages read back of a run's data: the recorded identity of every held-out and tuning example and a
summary of the training examples, checked against the data as it is now.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple

import numpy as np

from pipeline.data.examples import Example, Source, Split, val_indices
from pipeline.data.feed import to_numpy
from pipeline.data.seen import digests
from pipeline.data.specs import open_source
from pipeline.errors import DataError

if TYPE_CHECKING:
    from pipeline.rundir.run import Run


# data.split["tuning_from"] of a run whose tuning split is a share of its --val-data (`pipeline import --val-data`:
# the imported model may have trained on any --data image); absent: set aside from the training data, or none.
TUNING_FROM_VAL = "--val-data"


def recorded_split(run: "Run") -> Split:
    """The held-out and tuning splits train made of its data (fractions and seed), to draw them again. A run trained
    before the tuning split existed records no tuning fraction: none was set aside."""
    return Split(heldout_fraction=run.data.heldout_fraction, seed=run.data.seed,
                 tuning_fraction=float(run.data.split.get("tuning_fraction") or 0.0))


def tunes_on_val(run: "Run") -> bool:
    """Whether the run's tuning split is a share of its --val-data (an import's) rather than of its training data."""
    return bool(run.data.val_spec) and run.data.split.get("tuning_from") == TUNING_FROM_VAL


def _training_split(run: "Run") -> Split:
    """The split of the training data: with the tuning share taken from --val-data, none of it is set aside."""
    split = recorded_split(run)
    return replace(split, tuning_fraction=0.0) if tunes_on_val(run) else split


def identity_record(train: Source, val: Optional[Source], holdout: Split, tuning_from_val: bool = False) -> Dict[str, Any]:
    """What train records of its data: class names, a summary of the training examples and the
    held-out and tuning examples one by one, so later stages can name what changed. `tuning_from_val` (an import
    with --val-data): the tuning split is a share of `val` (`val_indices`), the rest of `val` is held out, and all of
    `train` is training data."""
    separate = val is not None
    on_val = separate and tuning_from_val and holdout.tuning_fraction > 0
    train_split = replace(holdout, tuning_fraction=0.0) if on_val else holdout
    train_ex = [train.examples[i] for i in train.indices("train", train_split, separate_heldout=separate)]
    if on_val:
        heldout = [val.examples[i] for i in val_indices(val.examples, "heldout", holdout)]
    else:
        heldout = val.examples if val else [train.examples[i] for i in train.indices("heldout", holdout)]
    record = {
        "classes": list(train.labels),
        "train": _summary(train_ex, len(train.labels)),
        "train_digests": digests(train_ex),  # what `pipeline parity --data` refuses (seen.py)
        "heldout": {**_summary(heldout, len(train.labels)), "examples": [list(e) for e in heldout]},
    }
    if holdout.tuning_fraction > 0:
        tuning = ([val.examples[i] for i in val_indices(val.examples, "tuning", holdout)] if on_val else
                  [train.examples[i] for i in train.indices("tuning", holdout, separate_heldout=separate)])
        record["tuning"] = {**_summary(tuning, len(train.labels)), "examples": [list(e) for e in tuning]}
    return record


def _summary(examples: Sequence[Example], num_classes: int) -> Dict[str, Any]:
    per_class = np.bincount([e.label for e in examples], minlength=num_classes).tolist()
    listing = json.dumps([list(e) for e in examples], separators=(",", ":")).encode("utf-8")
    return {"count": len(examples), "per_class": per_class, "sha256": hashlib.sha256(listing).hexdigest()}


def resolve_split(run: "Run", split: str, spec: Optional[str] = None) -> Tuple[Source, np.ndarray]:
    """The source and example positions of a run's 'train', 'heldout' or 'tuning' split, after checking that
    the data is what training recorded (same classes, same examples, same bytes). A run that set no tuning split
    aside (trained before it existed) has an empty one.

    `spec` replaces the recorded held-out data (`pipeline parity RUN --data SPEC`): its classes
    are matched to the run's by name and it is taken whole.
    """
    if split not in ("train", "heldout", "tuning"):
        raise ValueError(f"split {split!r}, expected 'train', 'heldout' or 'tuning'")
    data, classes = run.data, run.labels
    if spec is not None:
        source = open_source(spec, classes)
        return source, source.indices("all")
    recorded = data.identity
    if recorded is None:
        raise DataError("the run records no data identity (it was trained by an earlier edgeflow, whose held-out split "
                        "this version cannot reproduce); train it again")
    if data.val_spec and (split == "heldout" or (split == "tuning" and tunes_on_val(run))):
        source = open_source(data.val_spec, classes)
        indices = val_indices(source.examples, split, recorded_split(run)) if tunes_on_val(run) else source.indices("all")
    else:
        # An imported model's classes are numbered in its output order (`pipeline import`), not the folders' sorted one.
        source = open_source(data.train_spec, data.train.get("class_order"))
        if source.labels != list(classes):
            raise DataError(f"the classes of {source.spec} changed since training: the run has {list(classes)}, "
                            f"the data now has {source.labels}; train again, or restore the data")
        indices = source.indices(split, _training_split(run), separate_heldout=bool(data.val_spec))
    examples = [source.examples[i] for i in indices]
    if split == "heldout":
        _check_listed(recorded["heldout"], examples, source.spec, "held-out")
    elif split == "tuning":
        _check_listed(recorded.get("tuning") or {"examples": []}, examples, source.spec, "tuning")
    else:
        _check_train(recorded["train"], examples, classes, source.spec)
    return source, indices


def _check_listed(recorded: Dict[str, Any], examples: Sequence[Example], spec: str, name: str) -> None:
    was = {e[0]: tuple(e[1:]) for e in recorded["examples"]}
    now = {e.id: (e.label, e.digest) for e in examples}
    changes = [f"{name}: " + ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "") for name, ids in (
        ("added", sorted(set(now) - set(was))),
        ("removed", sorted(set(was) - set(now))),
        ("relabelled", sorted(i for i in set(now) & set(was) if now[i][0] != was[i][0])),
        ("changed content", sorted(i for i in set(now) & set(was) if now[i][1] != was[i][1])),
    ) if ids]
    if changes:
        raise DataError(f"the {name} examples of {spec} changed since training ({'; '.join(changes)}); "
                        "the parity and calibration of this run would no longer be about the data it was trained on: "
                        "restore the data, or train again")


def _check_train(recorded: Dict[str, Any], examples: Sequence[Example], classes: Sequence[str], spec: str) -> None:
    now = _summary(examples, len(classes))
    if now["sha256"] == recorded["sha256"]:
        return
    counts = [f"{c}: {a} -> {b}" for c, a, b in zip(classes, recorded["per_class"], now["per_class"]) if a != b]
    what = ("examples per class changed (" + ", ".join(counts[:5]) + ")") if counts else \
        "the same number of examples per class, but other files or other bytes"
    raise DataError(f"the training examples of {spec} changed since training: {what}; restore the data, or train again")


def load_split(run: "Run", split: str, spec: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Images and labels of a run's 'train', 'heldout' or 'tuning' split, decoded as training decodes them."""
    source, indices = resolve_split(run, split, spec)
    return to_numpy(source.dataset_at(run.image_size, indices))
