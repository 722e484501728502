"""Detection data specs, resolved to a checked `DetSource`:

    shapes | shapes?count=2000&size=128&seed=0    the built-in data set, drawn on the fly
    PATH/annotations.json                          COCO (file names relative to the JSON's folder, or to --images)
    PATH/data.yaml                                 YOLO, Ultralytics' layout
    'PATH/*.tfrecord' | gs://...                   TFRecords in the TF Object Detection API's schema
"""
from __future__ import annotations

import importlib
import os
from typing import Callable, NamedTuple, Optional, Sequence
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
    source = open_kind(spec, KINDS, labels, images)
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


class SpecKinds(NamedTuple):
    """What a task reads each kind of data spec with, and how its refusals name them ({spec!r} stands for the spec).
    A reader is named by its module's dotted path and imported only for a spec of its kind (TensorFlow for TFRecords
    only)."""

    builtin: str  # the built-in set's name, with or without ?options
    read_builtin: Callable[[str], object]  # (spec)
    coco: str  # its reader takes (spec, --images folders)
    yolo: str  # (spec)
    tfrecords: str  # (spec, the training data's classes or None)
    folder: str  # the refusal of a folder
    unknown: str  # the refusal of a spec of no kind above


def open_kind(spec: str, kinds: SpecKinds, labels: Optional[Sequence[str]], images: Sequence[str]):
    """The source `spec` names, read by the reader of its kind in `kinds`; DataError for a folder or no kind."""
    if spec == kinds.builtin or spec.startswith(kinds.builtin + "?"):
        return kinds.read_builtin(spec)
    lower = spec.lower()
    if is_coco(spec):
        return _reader(kinds.coco)(spec, images)
    if lower.endswith((".yaml", ".yml")):
        return _reader(kinds.yolo)(spec)
    if any(ch in spec for ch in "*?[") or lower.endswith((".tfrecord", ".tfrec")) or spec.startswith("gs://"):
        return _reader(kinds.tfrecords)(spec, labels)
    if os.path.isdir(spec):
        raise DataError(kinds.folder.format(spec=spec))
    raise DataError(kinds.unknown.format(spec=spec))


def _reader(dotted: str) -> Callable:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def builtin_options(spec: str, defaults: dict, min_size: int) -> dict:
    """The whole-number options of a built-in set's spec (`name?count=..&size=..&seed=..`), `defaults` for those not
    given; DataError for an unknown one, fewer than 2 images or a size below `min_size`."""
    _, _, query = spec.partition("?")
    values = dict(defaults)
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in values:
            raise DataError(f"data spec {spec!r}: unknown option {key!r}; expected some of {', '.join(defaults)}")
        try:
            values[key] = int(value)
        except ValueError as err:
            raise DataError(f"data spec {spec!r}: {key}={value!r}; expected a whole number") from err
    if values["count"] < 2 or values["size"] < min_size:
        raise DataError(f"data spec {spec!r}: expected count >= 2 and size >= {min_size}")
    return values


def _shapes(spec: str) -> DetSource:
    from pipeline.tasks.detect.data.shapes import shapes

    values = builtin_options(spec, SHAPES_DEFAULTS, min_size=16)
    return shapes(values["count"], size=values["size"], seed=values["seed"])


KINDS = SpecKinds(SHAPES, _shapes, "pipeline.tasks.detect.data.coco.read_coco", "pipeline.tasks.detect.data.yolo.read_yolo",
                  "pipeline.tasks.detect.data.tfrecords.read_tfrecords",
                  folder="detection data {spec!r} is a folder; expected its annotations.json (COCO), data.yaml (YOLO) "
                         "or a glob of TFRecord files",
                  unknown="detection data spec {spec!r} is neither 'shapes', a COCO annotations.json, a YOLO data.yaml, "
                          "nor a glob of TFRecord files")
