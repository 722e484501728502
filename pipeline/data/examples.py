"""Who an example is (identity, label, digest), which examples are held out or set aside for tuning, and one data
spec resolved (`Source`).

The held-out split is chosen per example by a seeded hash of its identity, so adding a file moves
no other file between splits. The tuning split (the remedy ladder's) is chosen the same way, by another hash, from
the examples that are not held out, before training: the model never trains on it.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, List, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf

from pipeline.data.client_fits import fit_choice
from pipeline.data.decode import DECODERS
from pipeline.errors import DataError

AUTOTUNE = tf.data.AUTOTUNE
SPLITS = ("train", "heldout", "tuning", "all")


@dataclass(frozen=True)
class Split:
    """Which examples are held out: recorded in the manifest so later stages evaluate on them."""

    heldout_fraction: float = 0.2  # share of examples held out when no --val-data is given
    seed: int = 1234  # seeds the per-example hash; same seed, same split
    # share of the training data set aside before training for the remedy ladder to judge on; 0 = none (runs trained
    # before it existed, and detection)
    tuning_fraction: float = 0.0


class Example(NamedTuple):
    """Who an example is, independent of its position in the data."""

    id: str  # path relative to the data folder, the record's id feature, or "digits/<index>"
    label: int
    digest: str  # sha256 (16 hex digits) of the example's bytes: a changed image is noticed


class Source:
    """One data spec, resolved: its class names, its examples, and a dataset factory."""

    def __init__(self, spec: str, kind: str, labels: List[str], examples: List[Example], records, original,
                 interleaved=None):
        self.spec = spec
        self.kind = kind  # digits | tfrecord | folder
        self.labels = labels
        self.examples = examples
        self._records = records  # () -> tf.data.Dataset of (raw, label), raw = pixels or encoded bytes
        self._original = original  # (indices) -> each example as stored: encoded bytes, or pixels for digits
        # () -> (position, raw, label) read from several files at once, in a fixed but mixed order; None = records
        self._interleaved = interleaved

    @property
    def num_examples(self) -> int:
        return len(self.examples)

    def describe(self) -> dict:
        return {"spec": self.spec, "kind": self.kind, "num_examples": self.num_examples, "num_classes": len(self.labels)}

    def indices(self, split: str, holdout: Optional[Split] = None, separate_heldout: bool = False) -> np.ndarray:
        """Positions of the examples in `split`, in data order. `separate_heldout`: the held-out examples are
        another source's (--val-data), so none of this one's is held out; its tuning split is still set aside."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r}, expected one of {SPLITS}")
        if split == "all":
            return np.arange(self.num_examples)
        holdout = holdout or Split()
        heldout = np.zeros(self.num_examples, bool) if separate_heldout else heldout_mask(self.examples, holdout)
        if split == "heldout":
            return np.flatnonzero(heldout)
        tuning = tuning_mask(self.examples, holdout) & ~heldout
        return np.flatnonzero(tuning if split == "tuning" else ~heldout & ~tuning)

    def dataset(self, image_size: int, split: str = "all", holdout: Optional[Split] = None) -> tf.data.Dataset:
        """(uint8 [S,S,3], int32 label) examples of `split`, in a fixed order, unbatched."""
        return self.dataset_at(image_size, self.indices(split, holdout))

    def dataset_at(self, image_size: int, indices: np.ndarray) -> tf.data.Dataset:
        """(uint8 [S,S,3], int32 label) of the examples at `indices` (ascending), unbatched."""
        if len(indices) == self.num_examples:
            return self._decoded(self._records(), image_size)
        return self._decoded(self._selected(self._records().enumerate(), indices), image_size)

    def training_dataset(self, image_size: int, indices: np.ndarray, client_fits: Optional[int] = None) -> tf.data.Dataset:
        """The examples at `indices` for training, where order does not matter (it is shuffled):
        TFRecord shards are read in parallel, interleaved, each record selected by its position.
        `client_fits`: a seed; each example is then fitted to the input as one of the clients would
        (pipeline/data/client_fits.py) instead of by the pixel contract alone."""
        if self._interleaved is None:
            selected = self._records() if len(indices) == self.num_examples else self._selected(self._records().enumerate(), indices)
        else:
            positioned = self._interleaved().map(lambda i, raw, label: (i, (raw, label)))
            selected = self._selected(positioned, indices)
        if client_fits is None:
            return self._decoded(selected, image_size)
        decode = DECODERS[self.kind]

        def fitted(position, example):
            raw, label = example
            return decode(raw, image_size, fit=fit_choice(client_fits, position)), label

        return selected.enumerate().map(fitted, num_parallel_calls=AUTOTUNE, deterministic=True)

    def _selected(self, positioned: tf.data.Dataset, indices: np.ndarray) -> tf.data.Dataset:
        """(raw, label) of the (position, (raw, label)) elements whose position is in `indices`."""
        keep = np.zeros(self.num_examples, bool)
        keep[indices] = True
        keep_t = tf.constant(keep)  # a lookup, not Python, inside the graph: runs on a TPU host too

        # Named functions, not two lambdas on one line: AutoGraph finds a lambda's source by its line
        # and cannot tell two apart ("found multiple definitions with identical signatures").
        def kept(position, example):
            return tf.gather(keep_t, position)

        def without_position(position, example):
            return example

        return positioned.filter(kept).map(without_position)

    def _decoded(self, ds: tf.data.Dataset, image_size: int) -> tf.data.Dataset:
        decode = DECODERS[self.kind]
        return ds.map(lambda raw, label: (decode(raw, image_size), label), num_parallel_calls=AUTOTUNE, deterministic=True)

    def count(self, split: str, holdout: Split) -> int:
        """Number of examples in `split`."""
        return len(self.indices(split, holdout))

    def originals(self, indices: Sequence[int]) -> List[Any]:
        """The examples at `indices` as stored (encoded image bytes; uint8 pixels for digits), checked
        against the digests taken when the source was opened."""
        items = self._original([int(i) for i in indices])
        for i, item in zip(indices, items):
            data = item.tobytes() if isinstance(item, np.ndarray) else item
            if digest(data) != self.examples[int(i)].digest:
                raise DataError(f"{self.examples[int(i)].id} in {self.spec} changed while this stage ran; run the stage again")
        return items


def heldout_mask(examples: Sequence[Example], holdout: Split) -> np.ndarray:
    """True for held-out examples: a seeded hash of each identity, uniform in [0, 1), under the fraction."""
    return np.array([_draw(f"{holdout.seed}:{e.id}") < holdout.heldout_fraction for e in examples], dtype=bool)


def tuning_mask(examples: Sequence[Example], holdout: Split) -> np.ndarray:
    """True for examples drawn for the tuning split: another seeded hash (independent of the held-out one) under
    its fraction. Callers remove the held-out examples from it."""
    if holdout.tuning_fraction <= 0:
        return np.zeros(len(examples), bool)
    return np.array([_draw(f"tuning:{holdout.seed}:{e.id}") < holdout.tuning_fraction for e in examples], dtype=bool)


def val_indices(examples: Sequence[Any], split: str, holdout: Split) -> np.ndarray:
    """Positions of an imported run's 'tuning' or 'heldout' split in its --val-data: a model brought from elsewhere may
    have trained on any --data image, so its tuning split is the seeded share of --val-data that `tuning_mask` draws
    (the hash training sets its own split aside with) and the rest is held out."""
    tuning = tuning_mask(examples, holdout)
    if split not in ("tuning", "heldout"):
        raise ValueError(f"split {split!r}, expected 'tuning' or 'heldout'")
    return np.flatnonzero(tuning if split == "tuning" else ~tuning)


def _draw(key: str) -> float:
    h = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") / 2.0 ** 64


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]

