"""Detection data specs, resolved to a checked `DetSource`:

    shapes | shapes?count=2000&size=128&seed=0    the built-in data set, drawn on the fly
    PATH/annotations.json                          COCO (file names relative to the JSON's folder, or to --images)
    PATH/data.yaml                                 YOLO, Ultralytics' layout
    'PATH/*.tfrecord' | gs://...                   TFRecords in the TF Object Detection API's schema
"""
from __future__ import annotations

import os
from typing import Optional, Sequence
from urllib.parse import parse_qsl

from pipeline.tasks.detect.data.examples import DetSource
from pipeline.errors import ConfigError, DataError

SHAPES = "shapes"
# The built-in set's defaults: enough images that a few minutes of CPU training reach the mAP.
SHAPES_DEFAULTS = {"count": 1200, "size": 128, "seed": 0}


def open_detection(spec: str, labels: Optional[Sequence[str]] = None, images: Sequence[str] = ()) -> DetSource:
    """The examples of `spec`, every box and image checked. `labels` (the training data's class names)
    must be the held-out data's too: detection classes are numbered, not matched by name. `images` (--images)
    are the folders a COCO spec's file names are also looked for in; the other kinds hold their own images,
    so a run's --images (checked by `check_images` against all its specs) passes them by."""
    source = _open(spec, labels, images)
    if labels is not None:
        check_classes(spec, source.labels, labels, "the training data's")
    return source


def check_classes(spec: str, got: Sequence[str], expected: Sequence[str], whose: str) -> None:
    """Refuse (DataError) classes other than `expected` (`whose`: "the run's"), naming the difference: detection
    classes are numbered, so the same names in another order are other classes."""
    got, expected = list(got), list(expected)
    if got == expected:
        return
    missing = [c for c in expected if c not in got]
    extra = [c for c in got if c not in expected]
    if missing or extra:
        what = "; ".join(part for part in (missing and f"missing {', '.join(map(repr, missing[:5]))}",
                                           extra and f"not {whose}: {', '.join(map(repr, extra[:5]))}") if part)
    elif len(got) != len(expected):
        what = f"{len(got)} classes with repeated names, {len(expected)} expected"
    else:
        at = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
        what = f"the same names in another order: class {at} is {got[at]!r}, {whose} class {at} is {expected[at]!r}"
    raise DataError(f"{spec}: classes {got}; expected {whose} classes {expected} in that order ({what})")


def is_coco(spec: str) -> bool:
    return spec.lower().endswith(".json")


def check_images(images: Sequence[str], specs: Sequence[Optional[str]]) -> None:
    """Refuse --images (ConfigError) unless one of `specs` (--data, --val-data; None = not given) is COCO,
    and unless each is a local folder. No folders, nothing to refuse."""
    if not images:
        return
    given = [s for s in specs if s]
    if not any(is_coco(s) for s in given):
        named = " and ".join(f"{s!r}" for s in given)
        raise ConfigError(f"--images {images[0]}: folders a COCO annotations.json's file names are relative to, but "
                          f"{named} {'is' if len(given) == 1 else 'are'} not COCO; expected --data or --val-data "
                          "PATH/annotations.json, or no --images")
    for folder in images:
        if not os.path.isdir(folder):
            found = "does not exist" if not os.path.exists(folder) else "is not a folder"
            raise ConfigError(f"--images {folder} {found}; expected a local folder holding the images the COCO "
                              "annotations' file names name")


def _open(spec: str, labels: Optional[Sequence[str]], images: Sequence[str]) -> DetSource:
    if spec == SHAPES or spec.startswith(SHAPES + "?"):
        return _shapes(spec)
    lower = spec.lower()
    if is_coco(spec):
        from pipeline.tasks.detect.data.coco import read_coco

        return read_coco(spec, images)
    if lower.endswith((".yaml", ".yml")):
        from pipeline.tasks.detect.data.yolo import read_yolo

        return read_yolo(spec)
    if any(ch in spec for ch in "*?[") or lower.endswith((".tfrecord", ".tfrec")) or spec.startswith("gs://"):
        from pipeline.tasks.detect.data.tfrecords import read_tfrecords

        return read_tfrecords(spec, labels)
    if os.path.isdir(spec):
        raise DataError(f"detection data {spec!r} is a folder; expected its annotations.json (COCO), data.yaml (YOLO) "
                        "or a glob of TFRecord files")
    raise DataError(f"detection data spec {spec!r} is neither 'shapes', a COCO annotations.json, a YOLO data.yaml, "
                    "nor a glob of TFRecord files")


def _shapes(spec: str) -> DetSource:
    from pipeline.tasks.detect.data.shapes import shapes

    _, _, query = spec.partition("?")
    values = dict(SHAPES_DEFAULTS)
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in values:
            raise DataError(f"data spec {spec!r}: unknown option {key!r}; expected some of {', '.join(SHAPES_DEFAULTS)}")
        try:
            values[key] = int(value)
        except ValueError as err:
            raise DataError(f"data spec {spec!r}: {key}={value!r}; expected a whole number") from err
    if values["count"] < 2 or values["size"] < 16:
        raise DataError(f"data spec {spec!r}: expected count >= 2 and size >= 16")
    return shapes(values["count"], size=values["size"], seed=values["seed"])
