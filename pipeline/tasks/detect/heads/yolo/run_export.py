"""What the anchor-free head's `pipeline export` does its own way: yolo_export.py's conversion (float twin, or int8 in
Frigate's yolo-generic layout) and the facts that describe it. The rest (calibration, float edits, the metadata
record, verification) is the detection export's, pipeline/tasks/detect/export.py, as for the SSD head, so the
stage writes and the remedy ladder scores both heads alike."""
from __future__ import annotations

from typing import Callable, Dict, Tuple


def conversion() -> Tuple[str, Dict[str, object], Callable[..., bytes]]:
    """(the model's name in its metadata, the head's facts, the converter): detect_export.HeadConversion's fields."""
    from edge.answers.heads.yolo import Settings
    from pipeline.tasks.detect.heads.yolo import export as yolo_export

    facts: Dict[str, object] = {"head": "yolo",
                                "layout": "Frigate yolo-generic: box distributions (1, N, 64), class logits (1, N, C)",
                                "host_decode": Settings()._asdict()}
    return "yolo detector", facts, yolo_export.convert
