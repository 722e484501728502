"""Which images a run trained or tuned on, by content (each image's digest, the sha256 of its bytes as the identity
record keeps it): what `pipeline parity RUN --data SPEC` refuses in a held-out set of the user's, for every task.

Training and `pipeline import` record every training image's digest (identity.train_digests). A run recorded before
that holds only a summary of its training images: their digests are read again from its training data by the task's
`reread` (which raises a PipelineError when the data is gone or no longer the one summarized), and when they cannot
be read the report says so. The tuning images an import set aside are listed one by one in every version. What an
imported model trained on before `pipeline import` is unknown to edgeflow: only the images the import was given are
known.
"""
from __future__ import annotations

from typing import Callable, FrozenSet, List, NamedTuple, Optional, Sequence

from pipeline.errors import DataError, PipelineError

SHOWN = 3  # ids named in a refusal


class Seen(NamedTuple):
    trained: Optional[FrozenSet[str]]  # digests of the images the run trained on; None when they cannot be known
    tuned: FrozenSet[str]  # digests of the tuning images an import set aside from its --val-data
    how: str  # in words: where `trained` came from, or why it is unknown


def digests(examples: Sequence) -> List[str]:
    """The identity record's `train_digests`: each image's digest once, sorted (the order and ids are the summary's)."""
    return sorted({e.digest for e in examples})


def seen(run, reread: Callable[[], Sequence]) -> Seen:
    """The digests of the images `run` trained and tuned on, as far as its manifest (and its data, `reread`) can tell."""
    identity = run.data.identity or {}
    tuned = frozenset(e[-1] for e in (identity.get("tuning") or {}).get("examples") or ())
    imported = " (given to `pipeline import`; what the model trained on before is unknown to edgeflow)" if run.origin else ""
    recorded = identity.get("train_digests")
    if recorded is not None:
        return Seen(frozenset(recorded), tuned, f"the {len(recorded)} training images' digests the run recorded{imported}")
    try:
        examples = reread()
    except PipelineError as err:
        return Seen(None, tuned, "the run records no training image digests (trained before edgeflow recorded them), and "
                                 f"its training data cannot be read again as it was ({err}): images it trained on cannot be "
                                 "told from new ones")
    return Seen(frozenset(e.digest for e in examples), tuned,
                f"the {len(examples)} training images read again from {run.data.train_spec} (the run records no digests; "
                f"the images are the ones it summarized){imported}")


def check_unseen(run, examples: Sequence, spec: str, reread: Callable[[], Sequence], instead: str = "leave them out") -> dict:
    """Refuse (DataError) a held-out set holding an image `run` trained or tuned on, by content (`instead`: what to
    do about it); else what was checked, for the report."""
    known = seen(run, reread)
    for found, what in ((known.trained, "trained"), (known.tuned, "tuned")):
        hits = [e.id for e in examples if found is not None and e.digest in found]
        if hits:
            named = ", ".join(hits[:SHOWN]) + (f" and {len(hits) - SHOWN} more" if len(hits) > SHOWN else "")
            raise DataError(f"--data {spec}: {len(hits)} of its {len(examples)} images are ones this run {what} on, by "
                            f"content ({named}); expected held-out images the run never trained or tuned on: {instead}")
    heldout = {e[-1] for e in ((run.data.identity or {}).get("heldout") or {}).get("examples") or ()}
    return {"trained_on_checked": known.trained is not None, "checked_against": known.how,
            "tuning_images": len(known.tuned), "recorded_heldout": sum(e.digest in heldout for e in examples)}
