"""The detector heads `pipeline train --task detect --head` offers, registered here and nowhere else, and which one a run
was trained with.

    ssd   anchors, the centre-size coder and TFLite's post-processing op in the model (heads/ssd/)
    yolo  anchor-free, YOLOv8's: two outputs decoded on the host, Frigate's yolo-generic layout (heads/yolo/)

A new head is a folder here with a `Head` subclass (heads/head.py) in its head.py, and one entry in _BY_NAME below.
"""
from __future__ import annotations

from pipeline.tasks.detect.heads.head import Head, named, pick
from pipeline.tasks.detect.heads.ssd.head import SsdHead
from pipeline.tasks.detect.heads.yolo.head import YoloHead

_BY_NAME = named([SsdHead(), YoloHead()])
NAMES = tuple(_BY_NAME)
DEFAULT = SsdHead.name  # why, with the numbers: docs/yolo.md "Which head" (bench/results/yolo_vs_ssd.md)
# Runs from before the choice of head record none: they are SSD's.
UNRECORDED = SsdHead.name


def get(name: str) -> Head:
    """The head named `name`."""
    return pick(_BY_NAME, name)


def of_run(run) -> Head:
    """The head a detection run was trained with."""
    return get((run.detection or {}).get("head", UNRECORDED))


def importing() -> Head:
    """The head `pipeline import --task detect` brings a detector into."""
    return next(head for head in _BY_NAME.values() if head.imports)
