"""Opening a data spec: 'digits', a TFRecord glob, or a folder of class folders, checked fully
before any stage uses it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from edge.pixels.image_files import IMAGE_SUFFIXES
from pipeline.data.decode import check_image
from pipeline.data.examples import AUTOTUNE, Example, Source, digest
from pipeline.data.tfrecords import open_tfrecords
from pipeline.errors import DataError


def open_source(spec: str, classes: Optional[Sequence[str]] = None) -> Source:
    """Resolve a data spec, checking it fully before any training starts: a bad spec, a missing
    feature or a corrupt image is a DataError that names the file and what was expected.

    `classes` (a run's class names) numbers a folder's classes by name, so held-out data with
    fewer classes keeps the run's class indices; a class the run does not know is refused.
    """
    if spec == "digits":
        return _digits()
    if any(ch in spec for ch in "*?[") or spec.endswith((".tfrec", ".tfrecord")) or spec.startswith("gs://"):
        return open_tfrecords(spec, classes)
    if os.path.isdir(spec):
        return _folder(Path(spec), classes)
    raise DataError(
        f"data spec {spec!r} is neither 'digits', a glob of TFRecord files, nor an existing folder of class sub-folders"
    )


def _digits() -> Source:
    from sklearn.datasets import load_digits  # ships with scikit-learn: no download

    digits = load_digits()
    # 0..16 grey levels -> 0..255 RGB pixels, like a camera frame.
    pixels = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    pixels = np.ascontiguousarray(np.repeat(pixels[..., None], 3, axis=-1))
    labels = digits.target.astype(np.int32)
    names = [str(i) for i in range(10)]
    examples = [Example(f"digits/{i:04d}", int(y), digest(p.tobytes())) for i, (p, y) in enumerate(zip(pixels, labels))]
    return Source("digits", "digits", names, examples, lambda: tf.data.Dataset.from_tensor_slices((pixels, labels)),
                  lambda indices: [pixels[i] for i in indices])


def _folder(root: Path, classes: Optional[Sequence[str]]) -> Source:
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(class_dirs) < 2 and classes is None:
        raise DataError(f"{root} has {len(class_dirs)} class sub-folder(s); expected one sub-folder of images per class, at least 2")
    names = [d.name for d in class_dirs] if classes is None else list(classes)
    unknown = [d.name for d in class_dirs if d.name not in names]
    if unknown:
        raise DataError(f"class folders {unknown} in {root} are not among the run's classes {names}")
    if not class_dirs:
        raise DataError(f"{root} has no class sub-folders; expected one sub-folder of images per class")
    paths: List[str] = []
    examples: List[Example] = []
    for class_dir in class_dirs:
        images = sorted(p for p in class_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            raise DataError(f"class folder {class_dir} holds no images; expected files ending in {', '.join(IMAGE_SUFFIXES)}")
        for image in images:
            data = image.read_bytes()
            check_image(data, str(image))
            paths.append(str(image))
            examples.append(Example(image.relative_to(root).as_posix(), names.index(class_dir.name), digest(data)))
    labels = np.array([e.label for e in examples], np.int32)

    def records():
        ds = tf.data.Dataset.from_tensor_slices((paths, labels))
        return ds.map(lambda p, y: (tf.io.read_file(p), y), num_parallel_calls=AUTOTUNE, deterministic=True)

    return Source(str(root), "folder", names, examples, records, lambda indices: [Path(paths[i]).read_bytes() for i in indices])
