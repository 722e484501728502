"""`figures`: the built-in pose data set, stick figures drawn on the fly (no download; the same for the same seed).

One to three figures per image on detection's `shapes` backgrounds, each 7 keypoints: head, neck, two hands, hip, two
feet, drawn as a filled head and limbs of one colour. A figure faces the viewer, so its left hand and foot are on the
image's right: a mirrored figure is a figure whose left and right swap (flip_idx), as a mirrored person's are.
Boxes are the drawn figure's extent; every keypoint is labelled and visible (a figure drawn later may cross an earlier
one's limb: figures overlap a little, as people do).
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

from pipeline.tasks.detect.data.examples import make_example
from pipeline.tasks.detect.data.shapes import _background, _iou
from pipeline.tasks.pose.data.examples import PoseSource, layout, pose_example

NAME = "figures"
CLASSES = ("figure",)
KEYPOINTS = ("head", "neck", "left_hand", "right_hand", "hip", "left_foot", "right_foot")
SKELETON = ((0, 1), (1, 2), (1, 3), (1, 4), (4, 5), (4, 6))
LAYOUT = layout(KEYPOINTS, SKELETON, where=NAME)  # flip_idx by name; sigmas the stated default
MAX_FIGURES = 3
MAX_OVERLAP = 0.2  # box IoU above which a new figure is drawn elsewhere


def figures(count: int = 600, size: int = 128, seed: int = 0) -> PoseSource:
    rng = np.random.default_rng(seed)
    examples = [_example(rng, n, size) for n in range(count)]
    return PoseSource(f"{NAME}?count={count}&size={size}&seed={seed}", NAME, list(CLASSES), examples, LAYOUT)


def _figure(rng, height: float):
    """One figure's keypoints [7, 2] (x, y) in pixels relative to its hip, its head radius and limb width."""
    lean = float(rng.uniform(-0.08, 0.08)) * height
    hip = np.array([0.0, 0.0])
    neck = np.array([lean, -0.38 * height])
    head = neck + [lean * 0.5, -0.17 * height]
    arm = 0.33 * height
    up_left, up_right = rng.uniform(-1.0, 1.1, 2)  # radians above the horizontal
    left_hand = neck + [arm * np.cos(up_left), -arm * np.sin(up_left)]
    right_hand = neck + [-arm * np.cos(up_right), -arm * np.sin(up_right)]
    stride = rng.uniform(0.08, 0.28, 2) * height
    leg = 0.45 * height
    left_foot = hip + [stride[0], np.sqrt(leg ** 2 - stride[0] ** 2)]
    right_foot = hip + [-stride[1], np.sqrt(leg ** 2 - stride[1] ** 2)]
    points = np.stack([head, neck, left_hand, right_hand, hip, left_foot, right_foot])
    return points, 0.1 * height, max(2.0, 0.05 * height)


def _example(rng, n: int, size: int):
    image = Image.fromarray(_background(rng, size))
    draw = ImageDraw.Draw(image)
    boxes, keypoints = [], []
    wanted = int(rng.integers(1, MAX_FIGURES + 1))
    for _ in range(wanted * 10):
        if len(boxes) == wanted:
            break
        points, radius, width = _figure(rng, float(rng.uniform(0.35, 0.8)) * size)
        low = np.minimum(points.min(axis=0), points[0] - radius) - width / 2
        high = np.maximum(points.max(axis=0), points[0] + radius) + width / 2
        extent = high - low
        if np.any(extent >= size - 1):
            continue
        shift = rng.uniform(0, size - 1 - extent) - low
        # Whole pixels: every keypoint is a pixel the figure covers (its centre is the keypoint, below).
        points, low, high = np.round(points + shift), low + shift, high + shift
        box = (int(np.floor(low[1])), int(np.floor(low[0])), int(np.ceil(high[1])), int(np.ceil(high[0])))
        if any(_iou(box, b) > MAX_OVERLAP for b in boxes):
            continue
        _draw(draw, points, radius, width, tuple(int(v) for v in rng.integers(0, 256, 3)))
        boxes.append(box)
        keypoints.append(points)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    ident = f"{NAME}/{n:05d}"
    det = make_example(ident, buffer.getvalue(), [tuple(v / size for v in b) for b in boxes], [0] * len(boxes),
                       len(CLASSES), ident)
    # A keypoint is the centre of its pixel: pixel i spans i..i+1, so its centre is (i + 0.5) / size.
    points = [[((x + 0.5) / size, (y + 0.5) / size, 2) for x, y in p] for p in keypoints]
    return pose_example(det, points, len(KEYPOINTS), [f"{ident}, figure {i}" for i in range(len(boxes))])


def _draw(draw: ImageDraw.ImageDraw, points: np.ndarray, radius: float, width: float, colour) -> None:
    for a, b in SKELETON:
        draw.line([tuple(points[a]), tuple(points[b])], fill=colour, width=int(round(width)))
    joint = max(1.0, width / 2)  # a round joint at every keypoint: the limbs' square ends leave some uncovered
    for x, y in points[1:]:
        draw.ellipse([x - joint, y - joint, x + joint, y + joint], fill=colour)
    x, y = points[0]
    draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=colour)
