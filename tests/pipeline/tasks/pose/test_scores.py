"""Pose scores: COCO's keypoint evaluator with the layout's sigmas, detection's box mAP and the pixel error, on known
answers: perfect ones score 1, a known shift lowers OKS by what OKS's formula says, and the sigmas are the layout's."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("pycocotools")
pytest.importorskip("tensorflow")

from pipeline.tasks.pose import scores  # noqa: E402
from pipeline.tasks.pose.data.examples import PoseExample, layout  # noqa: E402
from pipeline.tasks.pose.poses import Poses  # noqa: E402

pytestmark = pytest.mark.host

SIDE = 100


def _example(n: int, sigmas=None) -> PoseExample:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((SIDE, SIDE, 3), np.uint8)).save(buffer, format="PNG")
    box = np.array([[0.2, 0.2, 0.6, 0.6]], np.float32)  # 40 x 40 px: area 1600
    points = np.array([[[0.3, 0.3, 2], [0.5, 0.3, 2], [0.4, 0.5, 1]]], np.float32)
    return PoseExample(f"img{n}", buffer.getvalue(), f"d{n}", SIDE, SIDE, box, np.zeros(1, np.int32), keypoints=points,
                       num_keypoints=np.array([3], np.int32), areas=np.array([1600.0], np.float32))


LAYOUT = layout(["a", "b", "c"], [(0, 1), (1, 2)], sigmas=[0.05, 0.05, 0.05])


def _shifted(e: PoseExample, dx_px: float) -> Poses:
    perfect = scores.truth_as_poses(e)
    points = perfect.keypoints.copy()
    points[..., 0] += dx_px / SIDE
    return perfect._replace(keypoints=points)


def test_perfect_answers_score_one():
    examples = [_example(n) for n in range(4)]
    found = scores.evaluate(examples, [scores.truth_as_poses(e) for e in examples], ["thing"], LAYOUT)
    assert (found.oks_map, found.oks_map50, found.box_map, found.box_map50) == (1.0, 1.0, 1.0, 1.0)
    assert found.pixel_error["mean"] == 0.0 and found.pixel_error["matched"] == 4


def test_a_known_shift_costs_what_oks_says():
    """Every keypoint 4 px off: OKS = exp(-d^2 / (2 area (2 sigma)^2)) = exp(-16 / (2 * 1600 * 0.01)) = exp(-0.5) =
    0.607, so the object is found at OKS thresholds .5, .55 and .6 and missed from .65 up: mAP@[.5:.95] is 3/10
    (COCOeval's precision at each threshold is 1 or 0 here), mAP@.5 stays 1."""
    examples = [_example(n) for n in range(4)]
    expected_oks = np.exp(-16 / (2 * 1600 * (2 * 0.05) ** 2))
    assert 0.6 < expected_oks < 0.65
    found = scores.evaluate(examples, [_shifted(e, 4.0) for e in examples], ["thing"], LAYOUT)
    assert found.oks_map50 == 1.0
    assert found.oks_map == pytest.approx(0.3)
    assert found.box_map == 1.0  # the boxes did not move
    assert found.pixel_error["mean"] == pytest.approx(4.0, abs=1e-3)
    assert found.pixel_error["a"] == pytest.approx(4.0, abs=1e-3)


def test_the_layouts_sigmas_are_honoured():
    """The same 4 px shift with sigmas twice as wide: OKS exp(-16 / (2 * 1600 * 0.04)) = 0.88, found up to .85."""
    examples = [_example(n) for n in range(4)]
    wide = LAYOUT._replace(sigmas=(0.1, 0.1, 0.1))
    narrow = scores.evaluate(examples, [_shifted(e, 4.0) for e in examples], ["thing"], LAYOUT).oks_map
    broad = scores.evaluate(examples, [_shifted(e, 4.0) for e in examples], ["thing"], wide).oks_map
    assert broad == pytest.approx(0.8) and narrow < broad  # .5 .. .85 pass: 8 of 10 thresholds


def test_nothing_found_scores_zero_and_unmatched_objects_have_no_pixel_error():
    examples = [_example(n) for n in range(2)]
    found = scores.evaluate(examples, [Poses.empty(3) for _ in examples], ["thing"], LAYOUT)
    assert (found.oks_map, found.oks_map50, found.box_map) == (0.0, 0.0, 0.0)
    assert found.pixel_error["matched"] == 0 and found.pixel_error["objects"] == 2 and found.pixel_error["mean"] is None


def test_results_form_is_cocos_keypoints_in_pixels():
    e = _example(0)
    rows = scores.keypoint_results([e], [scores.truth_as_poses(e)])
    assert rows[0]["keypoints"] == pytest.approx([30, 30, 1, 50, 30, 1, 40, 50, 1])
    assert rows[0]["bbox"] == pytest.approx([20, 20, 40, 40])
