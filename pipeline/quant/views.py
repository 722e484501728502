"""Seeded views of an image (a crop of 75-100% of each side, a flip, an exposure): new looks at images a model has
trained on. Distillation trains on them (pipeline/quant/qat.py), and the remedy ladder's tuning split scores them
when it is drawn from the training images (pipeline/remedy/tuning_split.py), each with its recipe so that a client
can be fed the same picture.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import numpy as np


class View(NamedTuple):
    """How one view was made from its original, so a client can be fed the same picture."""

    original: int  # which image it was made from (the tuning split: its position in TuningSplit.originals)
    box: Optional[Tuple[float, float, float, float]] = None  # (left, top, right, bottom) as shares of each side; None: whole
    flip: bool = False
    gain: float = 1.0  # exposure: pixel values times this, clipped to 0..255


def random_view(large: np.ndarray, size: int, rng: np.random.Generator, original: int = 0) -> Tuple[np.ndarray, View]:
    """A seeded crop (75-100% of each side), flip and exposure (x0.85-1.15) of `large` (the tuning split decodes
    its images at twice the size) resized to `size`, and its recipe."""
    from PIL import Image

    h, w = large.shape[:2]
    ch, cw = int(h * rng.uniform(0.75, 1.0)), int(w * rng.uniform(0.75, 1.0))
    y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    crop = Image.fromarray(large[y:y + ch, x:x + cw]).resize((size, size), Image.BILINEAR)
    flip = bool(rng.random() < 0.5)
    if flip:
        crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
    gain = float(rng.uniform(0.85, 1.15))
    view = View(original, (x / w, y / h, (x + cw) / w, (y + ch) / h), flip, gain)
    return np.clip(np.asarray(crop, np.float32) * gain, 0, 255).astype(np.uint8), view
