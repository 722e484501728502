"""Keypoints kept right through augmentation: a flip mirrors x and renumbers the keypoints by flip_idx, a crop moves
them and unlabels those it cuts off, and the built-in figures are what they say (the same for a seed, left on the
image's right)."""
from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from pipeline.tasks.pose.data import augment  # noqa: E402
from pipeline.tasks.pose.data.figures import KEYPOINTS  # noqa: E402
from pipeline.tasks.pose.data.specs import open_pose  # noqa: E402

pytestmark = pytest.mark.host

FLIP = (0, 2, 1)  # head stays, left and right hands swap


def test_flip_mirrors_x_and_swaps_left_and_right():
    points = np.array([[[0.5, 0.1, 2], [0.8, 0.4, 2], [0.2, 0.5, 1]],
                       [[0.3, 0.3, 2], [0.0, 0.0, 0], [0.1, 0.9, 2]]], np.float32)
    flipped = augment.flip_keypoints(tf.constant(points), FLIP).numpy()
    np.testing.assert_allclose(flipped[0], [[0.5, 0.1, 2], [0.8, 0.5, 1], [0.2, 0.4, 2]], rtol=1e-6)
    # the unlabelled left hand stays (0, 0, 0) wherever it goes
    np.testing.assert_allclose(flipped[1], [[0.7, 0.3, 2], [0.9, 0.9, 2], [0.0, 0.0, 0]], rtol=1e-6)
    twice = augment.flip_keypoints(tf.constant(flipped), FLIP).numpy()
    np.testing.assert_allclose(twice, points, atol=1e-6)


def test_crop_moves_keypoints_and_unlabels_those_outside():
    points = tf.constant([[[0.5, 0.5, 2], [0.1, 0.5, 2], [0.75, 0.25, 1]]], tf.float32)
    moved = augment.crop_keypoints(points, tf.constant([0.0, 0.25, 1.0, 0.75])).numpy()
    np.testing.assert_allclose(moved[0], [[0.5, 0.5, 2], [0, 0, 0], [1.0, 0.25, 1]], atol=1e-6)


def test_fitted_training_items_keep_keypoints_on_the_figures_pixels():
    """Every labelled keypoint after flip, crop and stretch lies on a pixel of its own figure's colour (each figure is
    one colour on a textured background, so a keypoint moved or renumbered wrongly lands elsewhere), and the left hand
    stays right of the right hand (the figures face the viewer) however the item was flipped."""
    import io

    from PIL import Image

    source = open_pose("figures?count=8&size=64&seed=3")
    examples, flips = source.examples, source.layout.flip_idx
    ds = augment.fitted(augment.decoded(examples, len(KEYPOINTS), 4), 96, flips, training=True, seed=1, min_crop=0.7)
    checked = 0
    for item, e in zip(ds.as_numpy_iterator(), examples):
        assert item["image"].shape == (96, 96, 3) and item["keypoints"].shape == (4, 7, 3)
        original = np.asarray(Image.open(io.BytesIO(e.image)).convert("RGB"), np.float32)

        def before(i, k):
            x, y, _ = e.keypoints[i, k]
            return original[int(y * 64), int(x * 64)]

        for i in np.flatnonzero(item["mask"]):
            k = item["keypoints"][i]
            for n, (x, y, v) in enumerate(k):
                if v > 0:
                    pixel = item["image"][min(int(y * 96), 95), min(int(x * 96), 95)].astype(np.float32)
                    # keypoint n is the original's n, or its mirror's when the item was flipped
                    assert min(np.abs(pixel - before(i, n)).max(), np.abs(pixel - before(i, flips[n])).max()) < 40, (e.id, i, n)
                    checked += 1
            if k[2, 2] > 0 and k[3, 2] > 0:
                assert k[2, 0] > k[3, 0]
    assert checked > 40


def test_figures_are_the_same_for_a_seed_and_differ_across_seeds():
    a, b, c = (open_pose(f"figures?count=5&size=48&seed={s}") for s in (0, 0, 1))
    assert [e.digest for e in a.examples] == [e.digest for e in b.examples]
    assert [e.digest for e in a.examples] != [e.digest for e in c.examples]
    assert a.layout.flip_idx == (0, 1, 3, 2, 4, 6, 5) and a.layout.sigmas_source == "default"
    for e in a.examples:
        assert 1 <= len(e.boxes) <= 3 and e.keypoints.shape == (len(e.boxes), 7, 3)
        assert np.all(e.keypoints[..., 2] == 2)
        inside = ((e.keypoints[..., 0] >= e.boxes[:, None, 1]) & (e.keypoints[..., 0] <= e.boxes[:, None, 3])
                  & (e.keypoints[..., 1] >= e.boxes[:, None, 0]) & (e.keypoints[..., 1] <= e.boxes[:, None, 2]))
        assert inside.all()  # every keypoint within its figure's box
