"""`shapes`: a built-in detection data set drawn on the fly, no download, the same for the same seed.

Squares, circles, triangles and crosses of varied size, aspect and colour on textured backgrounds
(gradient, stripes, noise), overlapping a little; about one image in ten has no object. Boxes are
the drawn shapes' exact extents.
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

from pipeline.tasks.detect.data.examples import DetSource, make_example

CLASSES = ("square", "circle", "triangle", "cross")
MAX_OBJECTS = 4
MAX_OVERLAP = 0.25  # IoU above which a new shape is redrawn: objects overlap, but none hides another


def shapes(count: int = 400, size: int = 128, seed: int = 0) -> DetSource:
    rng = np.random.default_rng(seed)
    examples = [_example(rng, n, size) for n in range(count)]
    return DetSource(f"shapes?count={count}&size={size}&seed={seed}", "shapes", list(CLASSES), examples)


def _example(rng, n: int, size: int):
    image = Image.fromarray(_background(rng, size))
    draw = ImageDraw.Draw(image)
    boxes, classes = [], []
    wanted = 0 if rng.random() < 0.1 else int(rng.integers(1, MAX_OBJECTS + 1))
    for _ in range(wanted * 10):
        if len(boxes) == wanted:
            break
        cls = int(rng.integers(len(CLASSES)))
        h = float(rng.uniform(0.12, 0.45)) * size
        w = h * float(np.exp(rng.uniform(-0.4, 0.4))) if cls != 1 else h * float(np.exp(rng.uniform(-0.25, 0.25)))
        w = min(w, 0.6 * size)
        y0, x0 = rng.uniform(0, size - h), rng.uniform(0, size - w)
        box = (round(y0), round(x0), round(y0 + h), round(x0 + w))
        if any(_iou(box, b) > MAX_OVERLAP for b in boxes):
            continue
        _draw(draw, cls, box, tuple(int(v) for v in rng.integers(0, 256, 3)), rng)
        boxes.append(box)
        classes.append(cls)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    normalized = [tuple(v / size for v in b) for b in boxes]
    return make_example(f"shapes/{n:05d}", buffer.getvalue(), normalized, classes, len(CLASSES), f"shapes/{n:05d}")


def _background(rng, size: int) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    base = rng.uniform(60, 200, 3)
    slope = rng.uniform(-60, 60, (2, 3))
    image = base + yy[..., None] * slope[0] + xx[..., None] * slope[1]
    if rng.random() < 0.5:  # stripes at a random angle and period
        angle, period = rng.uniform(0, np.pi), rng.uniform(6, 24)
        phase = (yy * np.sin(angle) + xx * np.cos(angle)) * size / period
        image += (np.sin(2 * np.pi * phase) * rng.uniform(10, 35))[..., None]
    image += rng.normal(0, rng.uniform(4, 16), image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def _draw(draw: ImageDraw.ImageDraw, cls: int, box, colour, rng) -> None:
    y0, x0, y1, x1 = box
    # PIL fills up to and including x1, y1: draw to one pixel short so the box is the shape's extent.
    right, bottom = x1 - 1, y1 - 1
    if cls == 0:
        draw.rectangle([x0, y0, right, bottom], fill=colour)
    elif cls == 1:
        draw.ellipse([x0, y0, right, bottom], fill=colour)
    elif cls == 2:
        draw.polygon([(x0, bottom), (right, bottom), ((x0 + right) / 2, y0)], fill=colour)
    else:
        t = max(2, round(min(x1 - x0, y1 - y0) * float(rng.uniform(0.25, 0.4))))
        cy, cx = (y0 + y1) // 2, (x0 + x1) // 2
        draw.rectangle([x0, cy - t // 2, right, cy - t // 2 + t - 1], fill=colour)
        draw.rectangle([cx - t // 2, y0, cx - t // 2 + t - 1, bottom], fill=colour)


def _iou(a, b) -> float:
    ih = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iw = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ih * iw
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)
