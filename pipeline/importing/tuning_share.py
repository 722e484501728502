"""An imported run's tuning split, for both tasks: a seeded share of --val-data (the remedy ladder chooses a repair on
it, on images the model never trained on); the rest of --val-data is held out. pipeline/data/examples.py's
`val_indices` draws it, pipeline/data/identity.py records and resolves it.
"""
from __future__ import annotations


def tuning_fraction(config) -> float:
    """The share of --val-data set aside as the remedy ladder's tuning split (none without --val-data: the model may
    have trained on any --data image, so no share of --data is one it never trained on)."""
    return config.tuning_fraction if config.val_data else 0.0


def tuning_record(split, count: int) -> dict:
    """The manifest's data.split entries of an imported run's tuning split: where it was drawn, and how many."""
    from pipeline.data.identity import TUNING_FROM_VAL

    if split.tuning_fraction <= 0:
        return {}
    return {"tuning_from": TUNING_FROM_VAL, "tuning_examples": count}


def empty_heldout(config, tuning_count: int) -> str:
    """Why the held-out split is empty, for the DataError: the data holds no image, or the tuning share took them all."""
    where = config.val_data or config.data
    if tuning_count:
        return (f"the held-out split of {where} is empty: its {tuning_count} image(s) were all set aside as the tuning split "
                f"(--tuning-fraction {config.tuning_fraction:g}); expected at least one held out (more --val-data images, "
                "or a smaller --tuning-fraction)")
    return f"the held-out split of {where} is empty; expected at least one image"


def check_apart(tuning, heldout, config) -> None:
    """No image is both a tuning and a held-out image (by bytes: a --val-data folder may hold one file twice, under two
    names the hash splits apart); the ladder would otherwise choose on an image parity then reports."""
    from pipeline.errors import DataError

    held = {e.digest: e.id for e in heldout}
    twice = [(e.id, held[e.digest]) for e in tuning if e.digest in held]
    if twice:
        raise DataError(f"--val-data {config.val_data} holds the same image as {twice[0][0]} and {twice[0][1]}"
                        + (f" (and {len(twice) - 1} more)" if len(twice) > 1 else "") + ": one fell in the tuning split, "
                        "the other is held out; expected distinct images (remove the copies)")
