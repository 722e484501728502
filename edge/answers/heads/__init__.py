"""On-device reading of each detector head's outputs (numpy only), one module per head, chosen by what the model's
outputs are, never by asking which head made it.

Each head's module gives `find_layout(interpreter)`: where its outputs are, or None when they are not its kind. The
layout it returns reads them right after the invoke (`layout.read(interpreter)`, copies) and makes the op's kind of
answer of what it read (`layout.raw(outputs)`, a Raw), maybe later on a worker thread.

    yolo  two outputs, box distributions (1, N, 64) and class logits (1, N, C), decoded on the host (yolo.py)
    keypoints  a YOLO pose model's three: yolo's two and keypoints (1, N, 3K), decoded on the host (keypoints.py)
    ssd   TFLite's post-processing op's four outputs, read as they are (ssd.py)
"""
from __future__ import annotations

from typing import Any

from edge.answers.heads import keypoints, ssd, yolo
from edge.answers.heads.raw import Raw

# Asked in order: heads told by their outputs' shapes first, then the op's layout, whose check refuses anything else
# naming what a detector's outputs are expected to be.
DECODERS = (yolo, keypoints, ssd)

__all__ = ["DECODERS", "Raw", "layout"]


def layout(interpreter: Any):
    """The layout of the first head whose outputs the model has."""
    for decoder in DECODERS:
        found = decoder.find_layout(interpreter)
        if found is not None:
            return found
    raise AssertionError("the last decoder refuses what it cannot read")  # internal invariant: ssd.find_layout raises
