"""The detector heads `pipeline train --task detect --head` offers, and which one a run was trained with.

    ssd   anchors, the centre-size coder and TFLite's post-processing op in the model (pipeline/tasks/detect/heads/ssd/model.py)
    yolo  anchor-free, YOLOv8's: two outputs decoded on the host, Frigate's yolo-generic layout (pipeline/tasks/detect/heads/yolo/model.py)
"""
from __future__ import annotations

SSD, YOLO = "ssd", "yolo"
HEADS = (SSD, YOLO)
DEFAULT = SSD  # why, with the numbers: docs/yolo.md "Which head" (bench/results/yolo_vs_ssd.md)


def of_run(run) -> str:
    """The head a detection run was trained with (runs from before the choice are SSD's)."""
    return (run.detection or {}).get("head", SSD)
