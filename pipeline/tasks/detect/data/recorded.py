"""A run's recorded split of its --data read again (detect's, and the tasks' built on it): what the held-out checks,
calibration and the remedy ladder's tuning split draw from, by position."""
from __future__ import annotations

from typing import Callable


def recorded_share(run, open_data: Callable, split: str) -> list:
    """The examples of the run's --data in its recorded `split` ("train", "all" or "heldout"), in the split's order,
    opened by `open_data(spec, images=)` with the folders training found COCO file names in."""
    from pipeline.data.identity import recorded_split

    source = open_data(run.data.train_spec, images=run.data.images)
    return [source.examples[i] for i in source.indices(split, recorded_split(run))]
