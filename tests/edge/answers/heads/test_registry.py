"""edge/answers/heads/__init__.py: a model's reader chosen by its outputs, each head's layout reading its own outputs."""
from __future__ import annotations

import numpy as np
import pytest

from edge.answers import heads
from edge.answers.heads import ssd, yolo
from edge.errors import ModelCheckError


class Outputs:
    """An interpreter stand-in with the given output shapes (tensor index = position) and a 96x96 input."""

    def __init__(self, *shapes):
        self.shapes = shapes

    def get_output_details(self):
        return [{"index": i, "shape": np.array(s), "quantization": (0.0, 0)} for i, s in enumerate(self.shapes)]

    def get_input_details(self):
        return [{"index": 99, "shape": np.array([1, 96, 96, 3])}]


def test_the_op_outputs_are_read_by_the_op_reader():
    found = heads.layout(Outputs([1, 25, 4], [1, 25], [1, 25], [1]))
    assert isinstance(found, ssd.Indices) and tuple(found) == (0, 1, 2, 3)


def test_two_outputs_of_the_anchor_free_shapes_are_read_by_its_reader():
    n = sum((96 // s) ** 2 for s in yolo.STRIDES)
    found = heads.layout(Outputs([1, n, 3], [1, n, yolo.BOX_CHANNELS]))
    assert isinstance(found, yolo.Layout) and (found.boxes, found.logits) == (1, 0)


def test_other_outputs_are_refused_naming_what_a_detector_has():
    with pytest.raises(ModelCheckError, match="expected the detection post-processing op's 4"):
        heads.layout(Outputs([1, 10]))
