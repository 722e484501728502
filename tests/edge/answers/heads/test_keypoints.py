"""edge/answers/heads/keypoints.py, numpy only (the device side): a pose model's keypoints decoded by hand, the same case
quantized, the layout found by shape in the orders a file can hold, a plain detector never read as a pose model nor a
pose model as a plain detector, and edge.answers.detect and edge.answers.pose reading one."""
from __future__ import annotations

import numpy as np
import pytest

from edge.answers import heads
from edge.answers.detect import get_raw, kept, objects, output_indices
from edge.answers.heads import keypoints as pose_decode
from edge.answers.heads import yolo as yolo_decode
from edge.answers.pose import pose_layout
from edge.errors import ModelCheckError
from tests.edge.answers.heads.test_yolo import SIZE, _sides
from tests.edge.answers.heads.test_yolo import _Interpreter as YoloInterpreter

N = 21  # anchor points at SIZE 32: 16 at stride 8, 4 at stride 16, 1 at stride 32
K = 2


def _case():
    """Two objects: anchor 5 (stride 8, centre (12, 12)) and anchor 20 (stride 32, centre (16, 16)); each with its own
    keypoints, every other point's keypoints far off (they must never be read)."""
    dist = np.zeros((N, 64), np.float32)
    logits = np.full((N, 1), -4.0, np.float32)
    points = np.full((N, 3 * K), 9.0, np.float32)
    dist[5], logits[5] = _sides(1, 1, 1, 1), 2.0
    points[5] = [0.5, -1.0, 3.0, -2.0, 0.25, -3.0]  # (16, 4) score sigmoid(3); (-4, 14) score sigmoid(-3)
    dist[20], logits[20] = _sides(0, 0, 0, 0), 1.0  # a point box at (16, 16): overlaps nothing
    points[20] = [0.25, 0.125, 0.0, 0.0, 0.0, 1.0]  # (24, 20); (16, 16)
    return dist, logits, points


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_a_case_computed_by_hand():
    boxes, classes, scores, points = pose_decode.decode(*_case(), pose_decode.float_layout(SIZE, SIZE, K),
                                                        yolo_decode.Settings(25, 0.1, 0.6))
    assert classes.tolist() == [0, 0]
    np.testing.assert_allclose(scores, _sigmoid(np.array([2.0, 1.0])), rtol=1e-6)
    np.testing.assert_allclose(boxes[0], np.array([4, 4, 20, 20]) / 32, atol=1e-6)
    want = np.array([[[16, 4, _sigmoid(3.0)], [-4, 14, _sigmoid(-3.0)]],
                     [[24, 20, _sigmoid(0.0)], [16, 16, _sigmoid(1.0)]]], np.float32)
    want[..., :2] /= 32
    np.testing.assert_allclose(points, want, atol=1e-6)


def test_quantized_outputs_decode_to_the_same():
    dist, logits, points = _case()
    q = lambda x, scale, zero: np.clip(np.round(x / scale) + zero, -128, 127).astype(np.int8)  # noqa: E731
    layout = pose_decode.float_layout(SIZE, SIZE, K)
    layout = layout._replace(detector=layout.detector._replace(boxes_q=(0.25, 3), logits_q=(1 / 32, 0)),
                             keypoints_q=(1 / 8, 0))
    got = pose_decode.decode(q(dist, 0.25, 3), q(logits, 1 / 32, 0), q(points, 1 / 8, 0), layout,
                             yolo_decode.Settings(25, 0.1, 0.6))
    want = pose_decode.decode(dist, logits, points, pose_decode.float_layout(SIZE, SIZE, K), yolo_decode.Settings(25, 0.1, 0.6))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=1e-5)


class _Interpreter(YoloInterpreter):
    """What the readers ask of an interpreter: outputs with the given channels (tensor index 10 + position)."""

    def __init__(self, channels, tensors=None, n=N):
        self.details = [{"index": 10 + i, "shape": np.array([1, n, c]), "quantization": (0.0, 0)} for i, c in enumerate(channels)]
        self.tensors = tensors or {}


@pytest.mark.parametrize("channels,want,k", [
    ((64, 51, 1), (10, 12, 11), 17),  # the converter's order: box distributions, keypoints, class logits
    ((1, 64, 51), (11, 10, 12), 17),
    ((64, 51, 3), (10, 12, 11), 17),  # both non-box outputs a multiple of 3: the earlier is the keypoints
    ((64, 4, 6), (10, 11, 12), 2),  # only one a multiple of 3, wherever it is
])
def test_the_outputs_are_told_apart_by_shape(channels, want, k):
    layout = pose_decode.find_layout(_Interpreter(channels))
    assert (layout.detector.boxes, layout.detector.logits, layout.keypoints) == want and layout.num_keypoints == k


def test_each_reader_takes_only_its_own_layout():
    plain, pose = _Interpreter((64, 2)), _Interpreter((64, 51, 1))
    assert pose_decode.find_layout(plain) is None and yolo_decode.find_layout(pose) is None
    assert isinstance(heads.layout(plain), yolo_decode.Layout)
    assert isinstance(heads.layout(pose), pose_decode.Layout)
    for wrong in ((64, 51, 1, 1), (64, 64, 3), (51, 1, 2), (64, 4, 2)):
        assert pose_decode.find_layout(_Interpreter(wrong)) is None, wrong
    assert pose_decode.find_layout(_Interpreter((64, 51, 1), n=20)) is None  # N is not the input's anchor points


def test_a_model_that_is_not_a_pose_model_is_refused_naming_the_three_outputs():
    with pytest.raises(ModelCheckError, match=r"outputs have shapes \[\[1, 21, 64\], \[1, 21, 2\]\]; expected a pose "
                                              r"model's three: box distributions \[1, N, 64\], class logits"):
        pose_layout(_Interpreter((64, 2)))


def test_edge_detect_reads_a_pose_model_with_its_keypoints_in_pixels():
    dist, logits, points = _case()
    interpreter = _Interpreter((64, 3 * K, 1), {10: dist[None], 11: points[None], 12: logits[None]})
    layout = output_indices(interpreter)
    raw = get_raw(interpreter, layout)
    assert raw.count == 2 and raw.keypoints.shape == (2, K, 3)
    # Above 0.8 only the first object (sigmoid(2) = 0.88, sigmoid(1) = 0.73); in a 64 x 96 image.
    found = objects(raw, (64, 96), threshold=0.8, labels=["thing"])
    assert len(found) == 1 and found[0].label == "thing"
    # The second keypoint lies left of the input (x -4): at its edge, as the boxes are clipped.
    np.testing.assert_allclose([p[:2] for p in found[0].keypoints], [[16 * 2, 4 * 3], [0, 14 * 3]], atol=1e-4)
    assert found[0].box.xmin == pytest.approx(4 * 2) and found[0].box.ymax == pytest.approx(20 * 3)
    assert len(kept(raw, 0.8).ids) == 1  # the arrays evaluation scores, unchanged by the keypoints beside them
    # A plain detector's objects carry none.
    plain = _Interpreter((64, 1), {10: dist[None], 11: logits[None]})
    assert objects(get_raw(plain, output_indices(plain)), (64, 96), 0.8)[0].keypoints is None
