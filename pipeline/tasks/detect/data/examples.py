"""The one in-memory form of a detection data set, whatever it was read from.

A `DetExample` is one image: who it is (`id`, stable across readers for the same data), its encoded
bytes and their digest (a changed image is noticed, as for classification), its size, and its objects
as normalized (ymin, xmin, ymax, xmax) boxes with 0-based class indices. An image with no object is a
valid example with zero boxes.
"""
from __future__ import annotations

import io
from typing import List, NamedTuple, Sequence

import numpy as np
from PIL import Image, UnidentifiedImageError

from edge.files.bounded import MAX_IMAGE_PIXELS
from pipeline.data.examples import Split, digest, heldout_mask
from pipeline.errors import DataError

# A box edge may stick out of its image by this share of the image (rounding in labelling tools);
# past it the box is refused. Boxes within it are clipped.
EDGE_TOLERANCE = 1e-3


class DetExample(NamedTuple):
    id: str  # path relative to the data folder (COCO file_name, YOLO images/...), or the record's source_id
    image: bytes  # the encoded image as stored
    digest: str
    height: int
    width: int
    boxes: np.ndarray  # float32 [N, 4]: ymin, xmin, ymax, xmax, normalized to the image
    classes: np.ndarray  # int32 [N]: 0-based class indices
    # COCO's `iscrowd: 1` regions, as COCOeval takes them: not objects (never trained or scored as one), regions
    # where a detection is neither a true nor a false positive. float32 [K, 4] as `boxes`, and their classes [K].
    crowd: np.ndarray = np.zeros((0, 4), np.float32)
    crowd_classes: np.ndarray = np.zeros((0,), np.int32)


class DetSource(NamedTuple):
    """One detection data spec, read and checked."""

    spec: str
    kind: str  # coco | yolo | tfrecord | shapes
    labels: List[str]
    examples: List[DetExample]

    def indices(self, split: str, holdout: Split = Split()) -> np.ndarray:
        """Positions of the examples in 'train', 'heldout' or 'all', chosen by identity as for classification."""
        if split == "all":
            return np.arange(len(self.examples))
        mask = heldout_mask(self.examples, holdout)
        if split == "heldout":
            return np.flatnonzero(mask)
        if split == "train":
            return np.flatnonzero(~mask)
        raise ValueError(f"split {split!r}, expected 'train', 'heldout' or 'all'")


def image_size(data: bytes, where: str) -> tuple:
    """(height, width) of an encoded image, or a DataError naming `where`."""
    if not data:
        raise DataError(f"{where}: the image is empty (0 bytes); expected a JPEG or PNG image")
    try:
        with Image.open(io.BytesIO(data)) as im:
            width, height = im.size  # from the header: an image bomb is refused before it is decoded
            if width * height > MAX_IMAGE_PIXELS:
                raise DataError(f"{where}: the image is {width}x{height} pixels, more than the {MAX_IMAGE_PIXELS} "
                                "edgeflow decodes (docs/trust.md); expected a smaller image")
            im.load()  # decodes the pixels: a truncated file fails here, not during training
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as err:
        raise DataError(f"{where}: the image cannot be decoded ({err}); expected a JPEG or PNG image") from err
    return height, width


def checked_boxes(boxes: Sequence[Sequence[float]], classes: Sequence[int], num_classes: int,
                  where: Sequence[str]) -> tuple:
    """Normalized (ymin, xmin, ymax, xmax) boxes and class indices, checked: inside the image (within
    EDGE_TOLERANCE, then clipped), positive size, a known class. `where[i]` names box i in errors."""
    out = np.zeros((len(boxes), 4), np.float32)
    for i, (box, cls) in enumerate(zip(boxes, classes)):
        ymin, xmin, ymax, xmax = (float(v) for v in box)
        if not all(np.isfinite([ymin, xmin, ymax, xmax])):
            raise DataError(f"{where[i]}: box {_shown(box)} is not finite; expected numbers")
        if ymax <= ymin or xmax <= xmin:
            raise DataError(f"{where[i]}: box {_shown(box)} has zero or negative size; expected ymin < ymax and xmin < xmax")
        if min(ymin, xmin) < -EDGE_TOLERANCE or max(ymax, xmax) > 1 + EDGE_TOLERANCE:
            raise DataError(f"{where[i]}: box {_shown(box)} (ymin, xmin, ymax, xmax as a share of the image) "
                            f"lies outside the image; expected every edge within 0..1")
        if not (isinstance(cls, (int, np.integer)) and 0 <= cls < num_classes):
            raise DataError(f"{where[i]}: unknown class {cls!r}; expected a class index 0..{num_classes - 1}")
        out[i] = np.clip([ymin, xmin, ymax, xmax], 0.0, 1.0)
    return out, np.asarray(classes, np.int32).reshape(-1)


def make_example(ident: str, data: bytes, boxes, classes, num_classes: int, where: str, box_names=None,
                 crowd=(), crowd_classes=(), crowd_names=None) -> DetExample:
    height, width = image_size(data, where)
    names = box_names or [f"{where}, object {i}" for i in range(len(boxes))]
    b, c = checked_boxes(boxes, classes, num_classes, names)
    cb, cc = checked_boxes(crowd, crowd_classes, num_classes, crowd_names or [f"{where}, crowd region {i}" for i in range(len(crowd))])
    return DetExample(ident, data, digest(data), height, width, b, c, cb, cc)


def check_unique(examples: Sequence[DetExample], spec: str) -> None:
    seen = set()
    for e in examples:
        if e.id in seen:
            raise DataError(f"{spec}: image id {e.id!r} appears twice; expected each image once")
        seen.add(e.id)


def _shown(box) -> str:
    return "(" + ", ".join(f"{float(v):.4g}" for v in box) + ")"
