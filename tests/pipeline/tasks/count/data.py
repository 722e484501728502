"""The count task's data: 32x32 pictures of 0 to 3 white squares on black, drawn from a seed, stored as PNG bytes."""
from __future__ import annotations

import io
from typing import List, NamedTuple

import numpy as np

SIZE = 32
MAX_COUNT = 3
SPEC = "squares"  # the one data spec the task knows


class Example(NamedTuple):
    id: str
    count: int
    png: bytes  # the stored picture, what a device would be given


def examples(n: int, seed: int) -> List[Example]:
    from PIL import Image

    rng = np.random.default_rng(seed)
    made = []
    for i in range(n):
        count = int(rng.integers(0, MAX_COUNT + 1))
        pixels = np.zeros((SIZE, SIZE, 3), np.uint8)
        for cell in rng.choice(16, size=count, replace=False):  # a 4x4 grid of cells, one square in each chosen cell
            y, x = divmod(int(cell), 4)
            pixels[y * 8 + 1:y * 8 + 7, x * 8 + 1:x * 8 + 7] = 255
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="PNG")
        made.append(Example(f"squares-{i:04d}", count, out.getvalue()))
    return made


def pixels(png: bytes) -> np.ndarray:
    """[S, S, 3] uint8 of a stored picture."""
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB").resize((SIZE, SIZE)), np.uint8)


def split(n: int, heldout_fraction: float, seed: int):
    """(training examples, held-out examples) of the `n` made from `seed`: the last share held out."""
    made = examples(n, seed)
    cut = n - max(1, int(round(n * heldout_fraction)))
    return made[:cut], made[cut:]
