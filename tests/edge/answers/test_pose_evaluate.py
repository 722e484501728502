"""What `edge evaluate` keeps of a pose model's reading: every object at threshold 0 with its keypoints, x and y
clipped to the image as the boxes are (as `edge detect` clips them), and the document's task told by the model's
outputs."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from edge.answers.evaluation import kept_objects, task_of
from edge.answers.heads import keypoints, yolo
from edge.answers.heads.raw import Raw


def test_kept_objects_keep_each_objects_keypoints_clipped_to_the_image():
    points = np.array([[[-0.2, 0.5, 0.9], [1.3, 0.25, 0.1]], [[0.5, 0.5, 0.5], [0.4, 1.5, 0.7]]], np.float32)
    raw = Raw(np.array([[0.1, 0.1, 0.9, 0.9], [-0.1, 0.2, 0.5, 1.2]], np.float32), np.array([0.0, 1.0], np.float32),
              np.array([0.8, 0.3], np.float32), 2, points)
    ids, scores, boxes, kept = kept_objects(raw, 0.0)
    assert ids.tolist() == [0, 1] and kept.shape == (2, 2, 3)
    np.testing.assert_allclose(kept[0], [[0.0, 0.5, 0.9], [1.0, 0.25, 0.1]])
    np.testing.assert_allclose(kept[1], [[0.5, 0.5, 0.5], [0.4, 1.0, 0.7]])
    np.testing.assert_allclose(points[0, 0], [-0.2, 0.5, 0.9])  # the reading itself is left as it was
    ids, scores, boxes, kept = kept_objects(raw, 0.5)  # a threshold keeps the keypoints of the objects it keeps
    assert ids.tolist() == [0] and kept.shape == (1, 2, 3)
    assert len(kept_objects(raw._replace(keypoints=None), 0.0)) == 3  # a detector's: ids, scores, boxes


def test_the_document_says_pose_for_a_model_with_keypoints():
    centres, strides = yolo.anchor_points(64, 64)
    detector = yolo.Layout(0, 1, (0.0, 0), (0.0, 0), 64, 64, centres, strides)
    assert task_of(SimpleNamespace(indices=keypoints.Layout(detector, 2, (0.0, 0), 7))) == "pose"
    assert task_of(SimpleNamespace(indices=detector)) == "detect"
