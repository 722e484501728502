"""The pose heads `pipeline train --task pose --head` offers, registered here and nowhere else, and which one a run was
trained with.

    yolo  the detection task's anchor-free YOLO head with a third output, keypoints, decoded on the host (heads/yolo/)

A new head is a folder here with a head object in its head.py (the methods heads/yolo/head.py's PoseHead has), and one
entry in _BY_NAME below.
"""
from __future__ import annotations

from pipeline.tasks.detect.heads.head import named, pick
from pipeline.tasks.pose.heads.yolo.head import PoseHead

_BY_NAME = named([PoseHead()])
NAMES = tuple(_BY_NAME)
DEFAULT = PoseHead.name


def get(name: str) -> PoseHead:
    """The head named `name`."""
    return pick(_BY_NAME, name)


def of_run(run) -> PoseHead:
    """The head a pose run was trained with (its manifest's "pose" entry's "head"; ManifestError naming it when the run
    records none)."""
    return get(run.fact("pose", "head"))
