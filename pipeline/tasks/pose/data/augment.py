"""The pose input pipeline: detection's (pipeline/tasks/detect/data/augment.py: decode, flip, crop, stretch, boxes
padded with a mask) with each object's keypoints kept right through it.

A horizontal flip mirrors every x and then renumbers the keypoints by the layout's flip_idx (a mirrored left wrist is
a right wrist); a crop moves them with the pixels, and one that falls outside the crop is no longer labelled
(visibility 0). An unlabelled keypoint is (0, 0, 0) throughout. The fitted item is the head's input (the interface of
pipeline/tasks/pose/heads/): image, boxes, classes, mask and keypoints [M, K, 3].
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.data import augment as detect_augment
from pipeline.tasks.pose.data.examples import PoseExample


def padded_keypoints(examples: Sequence[PoseExample], k: int, max_boxes: int) -> np.ndarray:
    """[N, max_boxes, K, 3] float32, zeros past each image's objects (detect's `padded` refuses too many objects)."""
    out = np.zeros((len(examples), max_boxes, k, 3), np.float32)
    for i, e in enumerate(examples):
        out[i, :len(e.keypoints)] = e.keypoints[:max_boxes]
    return out


def decoded(examples: Sequence[PoseExample], k: int, max_boxes: int) -> tf.data.Dataset:
    """Unbatched dicts in the examples' order: detection's decoded items with keypoints float32 [M, K, 3]."""
    images, boxes, classes, mask = detect_augment.padded(examples, max_boxes)
    keypoints = padded_keypoints(examples, k, max_boxes)

    def decode(encoded, boxes, classes, mask, keypoints):
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        return {"image": image, "boxes": boxes, "classes": classes, "mask": mask, "keypoints": keypoints}

    ds = tf.data.Dataset.from_tensor_slices((tf.constant(list(images), tf.string), boxes, classes, mask, keypoints))
    return ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def flip_keypoints(keypoints, flip_idx: Sequence[int]):
    """Keypoints [..., K, 3] of a left-right mirrored image: x mirrored, then each keypoint k takes the place of its
    mirror flip_idx[k]; unlabelled ones stay (0, 0, 0)."""
    x, y, v = tf.unstack(keypoints, axis=-1)
    mirrored = tf.stack([tf.where(v > 0, 1.0 - x, 0.0), y, v], axis=-1)
    return tf.gather(mirrored, list(flip_idx), axis=-2)


def crop_keypoints(keypoints, window):
    """Keypoints moved into the crop `window` (ymin, xmin, ymax, xmax, normalized, in whole pixels as detection's
    crop takes it); those outside it become unlabelled."""
    y0, x0, y1, x1 = tf.unstack(window)
    x = (keypoints[..., 0] - x0) / (x1 - x0)
    y = (keypoints[..., 1] - y0) / (y1 - y0)
    inside = (keypoints[..., 2] > 0) & (x >= 0.0) & (x <= 1.0) & (y >= 0.0) & (y <= 1.0)
    return tf.stack([tf.where(inside, x, 0.0), tf.where(inside, y, 0.0), tf.where(inside, keypoints[..., 2], 0.0)], axis=-1)


def _pixel_window(image, window):
    """The window detection's crop cuts, rounded to whole pixels as it rounds it."""
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    y0, x0, y1, x1 = tf.unstack(window)
    top, left = tf.round(y0 * shape[0]), tf.round(x0 * shape[1])
    height = tf.maximum(tf.round((y1 - y0) * shape[0]), 1.0)
    width = tf.maximum(tf.round((x1 - x0) * shape[1]), 1.0)
    return tf.stack([top / shape[0], left / shape[1], (top + height) / shape[0], (left + width) / shape[1]])


def fitted(ds: tf.data.Dataset, image_size: int, flip_idx: Sequence[int], training: bool = False, seed: int = 0,
           min_crop: float = 0.85, flip: bool = True) -> tf.data.Dataset:
    """`decoded` items stretched to the square input. Training adds a random horizontal flip (when `flip`) and a random
    crop (each side >= `min_crop` of the image), drawn from `seed` and the item's position in `ds`."""
    flip_idx = [int(i) for i in flip_idx]

    def prepare(position, item):
        image, boxes, mask, keypoints = tf.cast(item["image"], tf.float32), item["boxes"], item["mask"], item["keypoints"]
        if training:
            draw = tf.random.stateless_uniform([5], seed=tf.stack([tf.cast(seed, tf.int64), position]))
            if flip:
                image, boxes, keypoints = tf.cond(
                    draw[0] < 0.5,
                    lambda: (*detect_augment.flip_horizontal(image, boxes), flip_keypoints(keypoints, flip_idx)),
                    lambda: (image, boxes, keypoints))
            h = min_crop + (1 - min_crop) * draw[1]
            w = min_crop + (1 - min_crop) * draw[2]
            top, left = (1 - h) * draw[3], (1 - w) * draw[4]
            window = tf.stack([top, left, top + h, left + w])
            keypoints = crop_keypoints(keypoints, _pixel_window(image, window))
            image, boxes, mask = detect_augment.crop(image, boxes, mask, window)
        image, boxes = detect_augment.stretch(image, boxes, image_size)
        image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
        image = tf.ensure_shape(image, [image_size, image_size, 3])
        return {"image": image, "boxes": tf.where(mask[:, None], boxes, 0.0), "classes": tf.where(mask, item["classes"], 0),
                "mask": mask, "keypoints": tf.where(mask[:, None, None], keypoints, 0.0)}

    return ds.enumerate().map(prepare, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
