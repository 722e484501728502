"""What every head's reading gives for one image: the post-processing op's four outputs, as the model wrote them or as
the host decoding wrote them for a head decoded after the invoke; a pose model's keypoints with them."""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np


class Raw(NamedTuple):
    """The post-processing op's outputs for one image, as the model wrote them."""

    boxes: np.ndarray  # [N, 4] ymin, xmin, ymax, xmax normalized to the input
    classes: np.ndarray  # [N] class ids (float, whole numbers)
    scores: np.ndarray  # [N], highest first
    count: int  # how many of the N positions hold an object
    keypoints: Optional[np.ndarray] = None  # [N, K, 3] a pose model's: x, y normalized to the input, the keypoint's score
