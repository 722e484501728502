"""Detection's part of telling which images a run trained on (pipeline/data/seen.py does the rest for every task): the
summary the identity record keeps of a set of images, and the training images read again for a run recorded before
the digests, trusted only when they are the ones it summarized."""
from __future__ import annotations

import hashlib
import json
from typing import Sequence

import numpy as np

from pipeline.errors import DataError


def summary(examples: Sequence, num_classes: int) -> dict:
    """The identity record's summary of some images: their count, objects per class and one sha256 over their
    listing (id, digest, boxes, classes), so a later stage can tell whether they changed."""
    listing = json.dumps([[e.id, e.digest, np.round(e.boxes, 5).tolist(), e.classes.tolist()] for e in examples],
                         separators=(",", ":")).encode("utf-8")
    per_class = np.bincount(np.concatenate([e.classes for e in examples]) if examples else np.zeros(0, int),
                            minlength=num_classes).tolist()
    return {"count": len(examples), "objects_per_class": per_class, "sha256": hashlib.sha256(listing).hexdigest()}


def training_again(run, read=None) -> list:
    """The run's training images read again from its data (by `read(run)`, detection's reader when not given); a
    DataError when they are not the ones it summarized."""
    from pipeline.tasks.detect.export import training_examples

    examples = (read or training_examples)(run)
    if summary(examples, len(run.labels))["sha256"] != ((run.data.identity or {}).get("train") or {}).get("sha256"):
        raise DataError(f"its training data {run.data.train_spec} changed since")
    return examples
