"""The detector: its anchors and box coder (its ops on the Edge TPU: tests/pipeline/tasks/detect/test_export.py, with the
post-processing op). Training it through `pipeline train --task detect` is tests/pipeline/tasks/detect/test_train.py."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tensorflow as tf  # noqa: E402

from pipeline.tasks.detect.heads.ssd.model import build_detector  # noqa: E402
from pipeline.tasks.detect.heads.ssd.anchors import AnchorSpec, anchors, assign, corners, decode, encode  # noqa: E402

pytestmark = pytest.mark.host


def test_encode_decode_round_trip_numpy_and_tf():
    a = anchors(128)
    rng = np.random.default_rng(0)
    y0, x0 = rng.uniform(0, 0.6, (2, len(a)))
    boxes = np.stack([y0, x0, y0 + rng.uniform(0.05, 0.4, len(a)), x0 + rng.uniform(0.05, 0.4, len(a))], -1).astype(np.float32)
    np.testing.assert_allclose(decode(encode(boxes, a), a), boxes, atol=1e-5)
    np.testing.assert_allclose(decode(encode(tf.constant(boxes), tf.constant(a)), tf.constant(a)).numpy(), boxes, atol=1e-5)
    # An anchor encodes to zeros: the coder is centred on its anchor.
    np.testing.assert_allclose(encode(corners(a), a), 0.0, atol=1e-5)


def test_anchor_count_matches_the_head_and_levels():
    spec = AnchorSpec()
    a = anchors(128, spec)
    assert a.shape == ((16 * 16 + 8 * 8) * spec.per_location, 4)
    model = build_detector("small_cnn", 128, 4, spec.per_location)
    out = model(tf.zeros([2, 128, 128, 3]))
    assert out["box_codes"].shape == (2, len(a), 4) and out["class_logits"].shape == (2, len(a), 5)


def test_assignment_gives_every_box_an_anchor_and_ignores_padding():
    a = anchors(128)
    boxes = tf.constant([[0.1, 0.1, 0.3, 0.25], [0.5, 0.5, 0.56, 0.58], [0, 0, 0, 0]], tf.float32)
    box_targets, classes = assign(tf.constant(a), boxes, tf.constant([2, 0, 3]), tf.constant([True, True, False]))
    classes = classes.numpy()
    assert set(classes[classes > 0].tolist()) == {1, 3}  # class c is target c + 1; the padded class 3 never appears
    for k, box in enumerate(boxes.numpy()[:2]):
        matched = np.flatnonzero(classes == [3, 1][k])
        decoded = decode(box_targets.numpy()[matched], a[matched])
        np.testing.assert_allclose(decoded, np.repeat(box[None], len(matched), 0), atol=1e-5)


