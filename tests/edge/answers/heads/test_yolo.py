"""edge/answers/heads/yolo.py, numpy only (the device side): a case computed by hand, the same case quantized, and the layout
found from an interpreter's outputs by shape, in either order; edge.answers.detect's reading of it behind the SSD head's Raw."""
from __future__ import annotations

import numpy as np
import pytest

from edge.answers.heads import yolo as yolo_decode
from edge.answers.detect import Raw, get_raw, output_indices, raw_of, read_outputs

SIZE = 32  # anchor points: 16 at stride 8, 4 at stride 16, 1 at stride 32


def _sides(left: int, top: int, right: int, bottom: int) -> np.ndarray:
    """Box-distribution logits that put (almost) all the mass on one bin per side."""
    row = np.zeros((4, 16), np.float32)
    for side, b in enumerate((left, top, right, bottom)):
        row[side, b] = 30.0
    return row.reshape(64)


def _case():
    dist = np.zeros((21, 64), np.float32)
    logits = np.full((21, 2), -4.0, np.float32)
    dist[5] = _sides(2, 1, 3, 2)  # stride 8, row 1, col 1: centre (12, 12)
    logits[5] = [-1.0, 2.0]
    dist[6] = _sides(2, 1, 2, 2)  # centre (20, 12): the same object, a lower score -> suppressed
    logits[6] = [-1.0, 1.0]
    dist[20] = _sides(1, 1, 1, 1)  # stride 32, centre (16, 16): (-16, -16, 48, 48), IoU with the first 0.2
    logits[20] = [0.5, -2.0]
    return dist, logits


def _layout(boxes_q=(0.0, 0), logits_q=(0.0, 0)):
    centres, strides = yolo_decode.anchor_points(SIZE, SIZE)
    return yolo_decode.Layout(0, 1, boxes_q, logits_q, SIZE, SIZE, centres, strides)


def test_a_case_computed_by_hand():
    dist, logits = _case()
    boxes, classes, scores = yolo_decode.decode(dist, logits, _layout(), yolo_decode.Settings(25, 0.1, 0.6))
    # Anchor 5: x1 = 12 - 2x8, y1 = 12 - 1x8, x2 = 12 + 3x8, y2 = 12 + 2x8 -> (ymin, xmin, ymax, xmax) / 32.
    np.testing.assert_allclose(boxes[0], np.array([4, -4, 28, 36]) / 32, atol=1e-6)
    np.testing.assert_allclose(boxes[1], np.array([-16, -16, 48, 48]) / 32, atol=1e-6)
    assert classes.tolist() == [1, 0]
    np.testing.assert_allclose(scores, [1 / (1 + np.exp(-2.0)), 1 / (1 + np.exp(-0.5))], rtol=1e-6)
    # The score filter: at 0.7 only the first is left (sigmoid(0.5) = 0.62).
    assert len(yolo_decode.decode(dist, logits, _layout(), yolo_decode.Settings(25, 0.7, 0.6))[0]) == 1
    # max detections
    assert len(yolo_decode.decode(dist, logits, _layout(), yolo_decode.Settings(1, 0.1, 0.6))[0]) == 1


def test_quantized_outputs_decode_to_the_same():
    dist, logits = _case()
    q_dist = np.clip(np.round(dist / 0.25) + 3, -128, 127).astype(np.int8)
    q_logits = np.clip(np.round(logits * 32), -128, 127).astype(np.int8)
    got = yolo_decode.decode(q_dist, q_logits, _layout((0.25, 3), (1 / 32, 0)), yolo_decode.Settings(25, 0.1, 0.6))
    want = yolo_decode.decode(dist, logits, _layout(), yolo_decode.Settings(25, 0.1, 0.6))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_nms_keeps_the_best_of_overlapping_boxes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.5, 0.9, 0.3, 0.5], np.float32)
    assert yolo_decode.nms(boxes, scores, 0.6, 10).tolist() == [1, 2]
    assert yolo_decode.nms(boxes, scores, 0.99, 10).tolist() == [1, 0, 2]  # ties: the earlier first; 3 is 0 again


class _Interpreter:
    """Just what the decode reads of an interpreter."""

    def __init__(self, tensors, swap=False):
        self.tensors = tensors
        details = [{"index": 7, "shape": np.array([1, 21, 64]), "quantization": (0.0, 0)},
                   {"index": 9, "shape": np.array([1, 21, 2]), "quantization": (0.0, 0)}]
        self.details = details[::-1] if swap else details

    def get_output_details(self):
        return self.details

    def get_input_details(self):
        return [{"index": 0, "shape": np.array([1, SIZE, SIZE, 3]), "dtype": np.uint8}]

    def get_tensor(self, index):
        return self.tensors[index]


@pytest.mark.parametrize("swap", [False, True])
def test_layout_by_shape_and_edge_detects_raw(swap):
    dist, logits = _case()
    interpreter = _Interpreter({7: dist[None], 9: logits[None]}, swap)
    layout = output_indices(interpreter)
    assert isinstance(layout, yolo_decode.Layout) and (layout.boxes, layout.logits) == (7, 9)
    raw = get_raw(interpreter, layout)
    assert isinstance(raw, Raw) and raw.count == 2 and raw.classes.tolist() == [1.0, 0.0]
    np.testing.assert_allclose(raw.boxes[0], np.array([4, -4, 28, 36]) / 32, atol=1e-6)


def test_other_outputs_are_not_taken_for_the_layout():
    dist, logits = _case()
    interpreter = _Interpreter({7: dist[None], 9: logits[None]})
    interpreter.details[0]["shape"] = np.array([1, 20, 64])  # N does not match the input's anchor points
    assert yolo_decode.find_layout(interpreter) is None


def test_the_two_outputs_read_after_the_invoke_decode_later_to_what_get_raw_gives():
    dist, logits = _case()
    interpreter = _Interpreter({7: dist[None], 9: logits[None]})
    layout = output_indices(interpreter)
    outputs = read_outputs(interpreter, layout)  # what the invoking thread does: no decode there
    assert [a.shape for a in outputs] == [(21, 64), (21, 2)]
    for later, now in zip(raw_of(outputs, layout), get_raw(interpreter, layout)):
        np.testing.assert_array_equal(later, now)
