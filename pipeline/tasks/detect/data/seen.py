"""Which images a detection run trained or tuned on, by content (each image's digest, the sha256 of its bytes as the
identity record keeps it): what `pipeline parity RUN --data SPEC` refuses in a held-out set of the user's.

Training and `pipeline import` record every training image's digest (identity.train_digests). A run recorded before
that holds only a summary of its training images (their count and one sha256 over their listing): their digests are
read again from its training data, and trusted when that listing still matches the summary; when the data is gone or
changed they cannot be known, and the report says so. The tuning images an import set aside are listed one by one in
every version. What an imported model trained on before `pipeline import` is unknown to edgeflow: only the images the
import was given are known.
"""
from __future__ import annotations

import hashlib
import json
from typing import FrozenSet, List, NamedTuple, Optional, Sequence

import numpy as np

from pipeline.errors import DataError, PipelineError

SHOWN = 3  # ids named in a refusal


class Seen(NamedTuple):
    trained: Optional[FrozenSet[str]]  # digests of the images the run trained on; None when they cannot be known
    tuned: FrozenSet[str]  # digests of the tuning images an import set aside from its --val-data
    how: str  # in words: where `trained` came from, or why it is unknown


def summary(examples: Sequence, num_classes: int) -> dict:
    """The identity record's summary of some images: their count, objects per class and one sha256 over their
    listing (id, digest, boxes, classes), so a later stage can tell whether they changed."""
    listing = json.dumps([[e.id, e.digest, np.round(e.boxes, 5).tolist(), e.classes.tolist()] for e in examples],
                         separators=(",", ":")).encode("utf-8")
    per_class = np.bincount(np.concatenate([e.classes for e in examples]) if examples else np.zeros(0, int),
                            minlength=num_classes).tolist()
    return {"count": len(examples), "objects_per_class": per_class, "sha256": hashlib.sha256(listing).hexdigest()}


def digests(examples: Sequence) -> List[str]:
    """The identity record's `train_digests`: each image's digest once, sorted (the order and ids are the summary's)."""
    return sorted({e.digest for e in examples})


def seen(run) -> Seen:
    """The digests of the images `run` trained and tuned on, as far as its manifest (and its data) can tell."""
    identity = run.data.identity or {}
    tuned = frozenset(d for _, d in (identity.get("tuning") or {}).get("examples") or ())
    imported = " (given to `pipeline import`; what the model trained on before is unknown to edgeflow)" if run.origin else ""
    recorded = identity.get("train_digests")
    if recorded is not None:
        return Seen(frozenset(recorded), tuned, f"the {len(recorded)} training images' digests the run recorded{imported}")
    return _older(run, identity, tuned, imported)


def _older(run, identity: dict, tuned: FrozenSet[str], imported: str) -> Seen:
    """A run recorded before the digests: its training images read again, trusted only when they are the ones it
    summarized."""
    from pipeline.tasks.detect.export import training_examples

    recorded = identity.get("train") or {}
    unknown = "the run records no training image digests (trained before edgeflow recorded them), and "
    try:
        examples = training_examples(run)
    except PipelineError as err:
        return Seen(None, tuned, unknown + f"its training data cannot be read again ({err}): images it trained on "
                                           "cannot be told from new ones")
    if summary(examples, len(run.labels))["sha256"] != recorded.get("sha256"):
        return Seen(None, tuned, unknown + f"its training data {run.data.train_spec} changed since: images it trained on "
                                           "cannot be told from new ones")
    return Seen(frozenset(e.digest for e in examples), tuned,
                f"the {len(examples)} training images read again from {run.data.train_spec} (the run records no digests; "
                f"the images are the ones it summarized){imported}")


def check_unseen(run, examples: Sequence, spec: str, instead: str = "leave them out") -> dict:
    """Refuse (DataError) a held-out set holding an image `run` trained or tuned on, by content (`instead`: what to
    do about it); else what was checked, for the report."""
    known = seen(run)
    for digests_, what in ((known.trained, "trained"), (known.tuned, "tuned")):
        hits = [e.id for e in examples if digests_ is not None and e.digest in digests_]
        if hits:
            named = ", ".join(hits[:SHOWN]) + (f" and {len(hits) - SHOWN} more" if len(hits) > SHOWN else "")
            raise DataError(f"--data {spec}: {len(hits)} of its {len(examples)} images are ones this run {what} on, by "
                            f"content ({named}); expected held-out images the run never trained or tuned on: {instead}")
    heldout = {d for _, d in ((run.data.identity or {}).get("heldout") or {}).get("examples") or ()}
    return {"trained_on_checked": known.trained is not None, "checked_against": known.how,
            "tuning_images": len(known.tuned),
            "recorded_heldout": sum(e.digest in heldout for e in examples)}
