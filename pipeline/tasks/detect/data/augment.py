"""The detection input pipeline: decode, augment with the boxes kept right, resize, and pad every
image's boxes to a fixed count with a mask, so each batch has static shapes (TPUStrategy needs them).

Two ways to fit an image to the square input, the two the clients use: `letterbox` keeps the aspect
ratio and puts the image in the top-left corner, zeros to the right and below (pycoral's
set_resized_input); `stretch` resizes to the square whatever the aspect (Frigate's region feed).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf

from pipeline.tasks.detect.heads.ssd.anchors import assign
from pipeline.tasks.detect.data.examples import DetExample

MAX_BOXES = 32  # boxes per image after padding; an image with more is refused (DataError in padded())
RESIZES = ("stretch", "letterbox")


def padded(examples: Sequence[DetExample], max_boxes: int = MAX_BOXES):
    """(encoded images [N], boxes [N, M, 4], classes [N, M], mask [N, M]) with M = max_boxes."""
    from pipeline.errors import DataError

    n = len(examples)
    boxes = np.zeros((n, max_boxes, 4), np.float32)
    classes = np.zeros((n, max_boxes), np.int32)
    mask = np.zeros((n, max_boxes), bool)
    for i, e in enumerate(examples):
        k = len(e.boxes)
        if k > max_boxes:
            raise DataError(f"{e.id}: {k} objects; expected at most {max_boxes} per image (--max-boxes {max_boxes}: "
                            f"raise it to {k} or more)")
        boxes[i, :k], classes[i, :k], mask[i, :k] = e.boxes, e.classes, True
    return np.array([e.image for e in examples], dtype=object), boxes, classes, mask


def flip_horizontal(image, boxes):
    """Mirror left-right; box x edges swap and mirror."""
    ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=-1)
    return tf.image.flip_left_right(image), tf.stack([ymin, 1.0 - xmax, ymax, 1.0 - xmin], axis=-1)


def crop(image, boxes, mask, window):
    """Crop to `window` (ymin, xmin, ymax, xmax, normalized); boxes move with it and are clipped; a box
    whose center falls outside the window leaves the mask."""
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    y0, x0, y1, x1 = tf.unstack(window)
    top, left = tf.cast(tf.round(y0 * shape[0]), tf.int32), tf.cast(tf.round(x0 * shape[1]), tf.int32)
    height = tf.maximum(tf.cast(tf.round((y1 - y0) * shape[0]), tf.int32), 1)
    width = tf.maximum(tf.cast(tf.round((x1 - x0) * shape[1]), tf.int32), 1)
    image = tf.image.crop_to_bounding_box(image, top, left, height, width)
    # The window in whole pixels, so boxes move exactly as the pixels did.
    y0, x0 = tf.cast(top, tf.float32) / shape[0], tf.cast(left, tf.float32) / shape[1]
    h, w = tf.cast(height, tf.float32) / shape[0], tf.cast(width, tf.float32) / shape[1]
    cy = (boxes[:, 0] + boxes[:, 2]) / 2
    cx = (boxes[:, 1] + boxes[:, 3]) / 2
    inside = (cy > y0) & (cy < y0 + h) & (cx > x0) & (cx < x0 + w)
    moved = (boxes - tf.stack([y0, x0, y0, x0])) / tf.stack([h, w, h, w])
    return image, tf.clip_by_value(moved, 0.0, 1.0), mask & inside


def letterbox(image, boxes, size: int):
    """Keep the aspect ratio, top-left corner, pad right and bottom with zeros."""
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = tf.minimum(size / shape[0], size / shape[1])
    new = tf.maximum(tf.cast(tf.round(shape * scale), tf.int32), 1)
    resized = _resize(image, new)
    placed = tf.image.pad_to_bounding_box(resized, 0, 0, size, size)
    share = tf.cast(new, tf.float32) / size
    return placed, boxes * tf.stack([share[0], share[1], share[0], share[1]])


def stretch(image, boxes, size: int):
    """Resize to the square whatever the aspect: normalized boxes do not change."""
    return _resize(image, tf.constant([size, size])), boxes


def decoded(examples: Sequence[DetExample], max_boxes: int = MAX_BOXES) -> tf.data.Dataset:
    """Unbatched dicts in the examples' order: image uint8 [H, W, 3] at the image's own size, boxes float32
    [M, 4], classes int32 [M], mask bool [M]. What can be cached: augmentation comes after."""
    images, boxes, classes, mask = padded(examples, max_boxes)

    def decode(encoded, boxes, classes, mask):
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        return {"image": image, "boxes": boxes, "classes": classes, "mask": mask}

    ds = tf.data.Dataset.from_tensor_slices((tf.constant(list(images), tf.string), boxes, classes, mask))
    return ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def fitted(ds: tf.data.Dataset, image_size: int, training: bool = False, seed: int = 0, resize: str = "stretch",
           min_crop: float = 0.6, letterbox_share: float = 0.0) -> tf.data.Dataset:
    """`decoded` items fitted to the square input. Training adds a random horizontal flip and a random crop
    (each side >= `min_crop` of the image), and fits `letterbox_share` of the items by letterbox whatever
    `resize` says (a model that saw both fits finds objects in either client's input), each drawn from `seed`
    and the item's position in `ds`."""
    if resize not in RESIZES:
        raise ValueError(f"resize {resize!r}, expected one of {RESIZES}")
    fit = letterbox if resize == "letterbox" else stretch

    def prepare(position, item):
        image, boxes, mask = tf.cast(item["image"], tf.float32), item["boxes"], item["mask"]
        this_fit = fit
        if training:
            draw = tf.random.stateless_uniform([6], seed=tf.stack([tf.cast(seed, tf.int64), position]))
            if letterbox_share > 0.0:
                def this_fit(image, boxes, size):
                    return tf.cond(draw[5] < letterbox_share, lambda: letterbox(image, boxes, size), lambda: fit(image, boxes, size))
            image, flipped = tf.cond(draw[0] < 0.5, lambda: flip_horizontal(image, boxes), lambda: (image, boxes))
            boxes = flipped
            h = min_crop + (1 - min_crop) * draw[1]
            w = min_crop + (1 - min_crop) * draw[2]
            top, left = (1 - h) * draw[3], (1 - w) * draw[4]
            image, boxes, mask = crop(image, boxes, mask, tf.stack([top, left, top + h, left + w]))
        image, boxes = this_fit(image, boxes, image_size)
        image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
        image = tf.ensure_shape(image, [image_size, image_size, 3])
        boxes = tf.where(mask[:, None], boxes, 0.0)
        return {"image": image, "boxes": boxes, "classes": tf.where(mask, item["classes"], 0), "mask": mask}

    return ds.enumerate().map(prepare, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _resize(image, size):
    """Bilinear to `size` [h, w]; with antialiasing when it shrinks the image, as the pixel contract resizes
    (TensorFlow's antialiased kernel also changes an enlarged image's pixels, which the contract's does not)."""
    shrinks = tf.reduce_any(tf.shape(image)[:2] > tf.cast(size, tf.int32))
    return tf.cond(shrinks, lambda: tf.image.resize(image, size, method="bilinear", antialias=True),
                   lambda: tf.image.resize(image, size, method="bilinear"))


def dataset(examples: Sequence[DetExample], image_size: int, training: bool = False, seed: int = 0,
            resize: str = "stretch", max_boxes: int = MAX_BOXES, min_crop: float = 0.6) -> tf.data.Dataset:
    """Unbatched dicts: image uint8 [S, S, 3], boxes float32 [M, 4], classes int32 [M], mask bool [M].
    Training data is augmented (`fitted`), shuffled and repeats without end."""
    if resize not in RESIZES:
        raise ValueError(f"resize {resize!r}, expected one of {RESIZES}")
    ds = decoded(examples, max_boxes)
    if training:
        # Shuffled and repeated before the draws are numbered: every epoch augments differently.
        ds = ds.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True).repeat()
    return fitted(ds, image_size, training, seed, resize, min_crop)


def with_targets(ds: tf.data.Dataset, anchor_boxes: np.ndarray) -> tf.data.Dataset:
    """(image, {box_targets [A, 4], class_targets [A]}) for training, assigned on the input side."""
    anchor_t = tf.constant(anchor_boxes)

    def targets(item):
        box_targets, class_targets = assign(anchor_t, item["boxes"], item["classes"], item["mask"])
        return item["image"], {"box_targets": box_targets, "class_targets": class_targets}

    return ds.map(targets, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
