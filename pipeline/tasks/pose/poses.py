"""A pose model's answers on one image, as every part of the task passes them: the host decoding after the float
model or the int8 file, the scores, parity, predict and the report.

    Poses(boxes, classes, scores, keypoints)

Coordinates are normalized to the image (0..1), boxes as the detection task's (ymin, xmin, ymax, xmax); keypoints as
COCO orders a keypoint's numbers, (x, y, score), x and y normalized, score the keypoint's visibility probability.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Poses(NamedTuple):
    boxes: np.ndarray  # float32 [n, 4] normalized (ymin, xmin, ymax, xmax)
    classes: np.ndarray  # int32 [n] 0-based
    scores: np.ndarray  # float32 [n] the object's score
    keypoints: np.ndarray  # float32 [n, K, 3] normalized x, y and the keypoint's score 0..1

    @classmethod
    def empty(cls, num_keypoints: int) -> "Poses":
        return cls(np.zeros((0, 4), np.float32), np.zeros((0,), np.int32), np.zeros((0,), np.float32),
                   np.zeros((0, num_keypoints, 3), np.float32))
