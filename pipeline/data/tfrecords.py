"""TFRecord shards in the Kaggle TPU flowers schema (image: JPEG bytes, class: int64, id: bytes): the one
place that reads and writes that schema. Local paths or gs:// through tf.io.gfile; class names from a
labels.txt beside the shards, else "0".."N-1". `pipeline predict` reads test shards too: `id` and `image`, no
`class` (identified_records, positioned_images).
"""
from __future__ import annotations

import json
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError

from edge.errors import InputError
from edge.model.labels import parse_labels
from pipeline.data.decode import check_image
from pipeline.data.examples import AUTOTUNE, Example, Source, digest
from pipeline.errors import DataError

TFRECORD_FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "id": tf.io.FixedLenFeature([], tf.string),
}
LABELS_NAME = "labels.txt"  # class names, one a line, beside TFRecord shards (written by `pipeline prepare`)


def encode_record(image: bytes, label: int, ident: str) -> bytes:
    """One serialized tf.train.Example in the schema above."""
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
        "class": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
        "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[ident.encode("utf-8")])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def open_tfrecords(pattern: str, classes: Optional[Sequence[str]]) -> Source:
    files = sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise DataError(f"no TFRecord files match {pattern!r}; expected a glob such as 'data/train-*.tfrec'")

    def records():
        parsed = tf.data.TFRecordDataset(files).map(
            lambda r: tf.io.parse_single_example(r, TFRECORD_FEATURES), num_parallel_calls=AUTOTUNE, deterministic=True
        )
        return parsed.map(lambda ex: (ex["image"], tf.cast(ex["class"], tf.int32)))

    def original(indices: List[int]) -> List[bytes]:
        wanted, found = set(indices), {}
        for i, raw in enumerate(tf.data.TFRecordDataset(files)):
            if i in wanted:
                found[i] = tf.train.Example.FromString(raw.numpy()).features.feature["image"].bytes_list.value[0]
        return [found[i] for i in indices]

    examples, per_file = _check_tfrecords(files)
    starts = np.concatenate([[0], np.cumsum(per_file)[:-1]]).astype(np.int64)

    def interleaved():
        # Several shards read at once (the TPU guides' advice), each record tagged with its position in
        # `examples` so the split still selects by identity, whatever order the shards interleave in.
        def read(path, start):
            return tf.data.TFRecordDataset(path).enumerate().map(lambda i, r: (start + i, r))

        ds = tf.data.Dataset.from_tensor_slices((files, starts)).interleave(
            read, cycle_length=min(len(files), 16), num_parallel_calls=AUTOTUNE, deterministic=True)
        return ds.map(lambda i, r: _parsed(i, tf.io.parse_single_example(r, TFRECORD_FEATURES)),
                      num_parallel_calls=AUTOTUNE, deterministic=True)

    named = _labels_beside(files)
    names = named or [str(i) for i in range(max(e.label for e in examples) + 1)]
    unknown = sorted({e.label for e in examples if e.label >= len(names)})
    if named and unknown:
        raise DataError(f"{pattern} has class ids {unknown[:5]}, but its {LABELS_NAME} names {len(named)} classes "
                        f"(ids 0..{len(named) - 1}); expected one name per class id")
    if classes is not None:
        unknown = sorted({e.label for e in examples if e.label >= len(classes)})
        if unknown:
            raise DataError(f"{pattern} has class ids {unknown[:5]}, the run knows {len(classes)} classes (ids 0..{len(classes) - 1})")
        if named and named != list(classes):
            raise DataError(f"the {LABELS_NAME} beside {pattern} names classes {named}, the run's are {list(classes)}; "
                            "expected the same classes in the same order")
        names = list(classes)
    return Source(pattern, "tfrecord", names, examples, records, original, interleaved)


def _parsed(position, example):
    return position, example["image"], tf.cast(example["class"], tf.int32)


def _labels_beside(files: List[str]) -> Optional[List[str]]:
    """Class names from the labels.txt next to the shards, or None when there is none. Shards from
    several folders must agree: one set of names, or none at all."""
    found = {}
    for folder in sorted({os.path.dirname(f) for f in files}):
        path = f"{folder}/{LABELS_NAME}" if folder else LABELS_NAME
        if tf.io.gfile.exists(path):
            with tf.io.gfile.GFile(path, "rb") as f:
                text = f.read()
            try:
                found[path] = parse_labels(text, str(path), names_only=True)
            except InputError as err:
                raise DataError(str(err)) from err
        else:
            found[path] = None
    if len({json.dumps(v) for v in found.values()}) > 1:
        raise DataError(f"the TFRecord folders disagree on class names: {', '.join(f'{p}: {v}' for p, v in found.items())}; "
                        f"expected the same {LABELS_NAME} beside every shard, or none")
    return next(iter(found.values()))


def _check_tfrecords(files: List[str]) -> Tuple[List[Example], List[int]]:
    """Parse and decode every record once, so a bad record fails here, named, and not mid-training.
    Returns the examples in file order and the number of records in each file."""
    examples: List[Example] = []
    per_file: List[int] = []
    seen: Dict[str, str] = {}
    for path in files:
        index = -1
        try:
            for index, raw in enumerate(tf.data.TFRecordDataset(path)):
                example = tf.train.Example.FromString(raw.numpy())
                feature = example.features.feature
                where = f"{path}: record {index}"
                for name in TFRECORD_FEATURES:
                    if name not in feature:
                        raise DataError(
                            f"{where} has no feature {name!r}; expected features image (JPEG bytes), "
                            f"class (int64) and id (bytes) as in the Kaggle TPU flowers schema"
                        )
                if not feature["class"].int64_list.value:
                    raise DataError(f"{where}: feature 'class' is not an int64")
                if not feature["id"].bytes_list.value:
                    raise DataError(f"{where}: feature 'id' is not bytes")
                image = feature["image"].bytes_list.value[0] if feature["image"].bytes_list.value else b""
                check_image(image, where)
                ident = feature["id"].bytes_list.value[0].decode("utf-8", "backslashreplace")
                if ident in seen:
                    raise DataError(f"{where} repeats id {ident!r} (first in {seen[ident]}); expected a unique id per record")
                seen[ident] = where
                examples.append(Example(ident, int(feature["class"].int64_list.value[0]), digest(image)))
            per_file.append(index + 1)
        except tf.errors.OpError as err:
            raise DataError(f"{path}: cannot read record {index + 1} as a TFRecord ({err.message.splitlines()[0]})") from err
    if not examples:
        raise DataError(f"TFRecord files {files} hold no records")
    if min(e.label for e in examples) < 0:
        raise DataError(f"negative class id {min(e.label for e in examples)} in {files}; expected class ids 0..N-1")
    return examples, per_file



# ---------------------------------------------------------------------------------------------
# Predicting (`pipeline predict`): records with `image` and `id`; `class` may be missing (Kaggle's test shards) and is ignored.

_IMAGE_ONLY = {"image": tf.io.FixedLenFeature([], tf.string, default_value="")}


def identified_records(path: str) -> Iterator[Tuple[int, Optional[str], Optional[bytes]]]:
    """(index, id, image bytes) of every record of one shard, in order; the id or the image is None when
    the record lacks that feature. A file that is not TFRecords is a DataError naming it."""
    index = -1
    try:
        for index, raw in enumerate(tf.data.TFRecordDataset(path)):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            ident = feature["id"].bytes_list.value if "id" in feature else []
            image = feature["image"].bytes_list.value if "image" in feature else []
            yield (index, ident[0].decode("utf-8", "backslashreplace") if ident and ident[0] else None,
                   image[0] if image else None)
    except (tf.errors.OpError, DecodeError) as err:
        detail = err.message.splitlines()[0] if isinstance(err, tf.errors.OpError) else str(err)
        raise DataError(f"{path}: cannot read record {index + 1} as a TFRecord of tf.train.Example ({detail}); "
                        "expected shards in the Kaggle TPU schema") from err


def positioned_images(files: Sequence[str], starts: Sequence[int]) -> tf.data.Dataset:
    """(position, image bytes) of every record of `files`, shard i's records numbered from starts[i]: shards
    read in parallel, interleaved (the order is mixed; the positions say whose each image is)."""
    def read(path, start):
        return tf.data.TFRecordDataset(path).enumerate().map(lambda i, r: (start + i, r))

    ds = tf.data.Dataset.from_tensor_slices((list(files), np.asarray(starts, np.int64))).interleave(
        read, cycle_length=max(1, min(len(files), 16)), num_parallel_calls=AUTOTUNE, deterministic=True)
    return ds.map(lambda i, r: (i, tf.io.parse_single_example(r, _IMAGE_ONLY)["image"]), num_parallel_calls=AUTOTUNE,
                  deterministic=True)
