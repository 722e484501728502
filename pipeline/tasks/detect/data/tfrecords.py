"""Detection TFRecords in the TF Object Detection API's schema, local or gs:// (what a Cloud TPU reads).

Per record: `image/encoded`, `image/source_id` (the identity; `image/filename` when it is absent),
`image/height`, `image/width`, `image/object/bbox/{xmin,ymin,xmax,ymax}` normalized, and
`image/object/class/label`, 1-based as the API's label maps are (0 is its background), with
`image/object/class/text`. Class names come from a labels.txt beside the shards.
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, List, Optional, Sequence

import tensorflow as tf
from google.protobuf.message import DecodeError

from pipeline.tasks.detect.data.examples import DetExample, DetSource, check_unique, make_example
from pipeline.errors import DataError

LABELS_NAME = "labels.txt"
_BOX_KEYS = ("ymin", "xmin", "ymax", "xmax")


def encode_example(example: DetExample, labels: Sequence[str]) -> bytes:
    def b(values):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))

    def f(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    def i(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    ident = example.id.encode("utf-8")
    feature = {
        "image/encoded": b([example.image]), "image/source_id": b([ident]), "image/filename": b([ident]),
        "image/height": i([example.height]), "image/width": i([example.width]),
        "image/object/class/label": i([int(c) + 1 for c in example.classes]),
        "image/object/class/text": b([labels[c].encode("utf-8") for c in example.classes]),
    }
    for k, key in enumerate(_BOX_KEYS):
        feature[f"image/object/bbox/{key}"] = f(example.boxes[:, k].tolist())
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_tfrecords(source: DetSource, folder: str, shards: int = 1, prefix: str = "detect",
                    encode: Callable[[object, Sequence[str]], bytes] = encode_example) -> List[str]:
    """Write `source` as `shards` files `PREFIX-XXXXX-of-YYYYY.tfrecord` plus labels.txt in `folder`, each example's
    record `encode(example, labels)` (a task built on detection adds its own features to detection's record)."""
    tf.io.gfile.makedirs(folder)
    paths = [os.path.join(folder, f"{prefix}-{k:05d}-of-{shards:05d}.tfrecord") for k in range(shards)]
    writers = [tf.io.TFRecordWriter(p) for p in paths]
    try:
        for n, example in enumerate(source.examples):
            writers[n % shards].write(encode(example, source.labels))
    finally:
        for w in writers:
            w.close()
    with tf.io.gfile.GFile(os.path.join(folder, LABELS_NAME), "w") as f:
        f.write("".join(f"{name}\n" for name in source.labels))
    return paths


def read_tfrecords(pattern: str, labels: Optional[Sequence[str]] = None) -> DetSource:
    files = sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise DataError(f"{pattern}: no files match; expected TFRecord shards (a path or glob, local or gs://)")
    if labels is None:
        labels = _labels_beside(files[0])
    examples = []
    for path in files:
        examples.extend(_read_file(path, labels))
    check_unique(examples, pattern)
    return DetSource(pattern, "tfrecord", list(labels), examples)


def _read_file(path: str, labels: Sequence[str]) -> Iterable[DetExample]:
    try:
        records = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
    except tf.errors.OpError as err:
        raise DataError(f"{path}: not a readable TFRecord file ({err.message.splitlines()[0]})") from err
    for n, raw in enumerate(records):
        where = f"{path}, record {n}"
        try:
            features = tf.train.Example.FromString(raw).features.feature
        except DecodeError as err:
            raise DataError(f"{where}: not a tf.train.Example ({err})") from err
        data = _one(features, "image/encoded", where)
        ident = (_bytes(features, "image/source_id") or _bytes(features, "image/filename") or f"{os.path.basename(path)}/{n}")
        coords = [list(features[f"image/object/bbox/{k}"].float_list.value) for k in _BOX_KEYS]
        classes = [c - 1 for c in features["image/object/class/label"].int64_list.value]
        if len({len(c) for c in coords} | {len(classes)}) != 1:
            raise DataError(f"{where}: the bbox lists and image/object/class/label have different lengths "
                            f"({', '.join(str(len(c)) for c in coords)}, {len(classes)}); expected one entry per object")
        names = [f"{where} ({ident}), object {k}" for k in range(len(classes))]
        bad = [k for k, c in enumerate(classes) if not 0 <= c < len(labels)]
        if bad:
            k = bad[0]
            raise DataError(f"{names[k]}: unknown image/object/class/label {classes[k] + 1}; expected 1..{len(labels)} "
                            "(1-based, as the TF Object Detection API's label maps)")
        yield make_example(ident, data, list(zip(*coords)), classes, len(labels), f"{where} ({ident})", names)


def _labels_beside(first: str) -> List[str]:
    path = os.path.join(os.path.dirname(first), LABELS_NAME)
    if not tf.io.gfile.exists(path):
        raise DataError(f"{path}: not found; expected the class names, one a line, beside the TFRecord shards")
    with tf.io.gfile.GFile(path) as f:
        return [line.strip() for line in f.read().splitlines() if line.strip()]


def _bytes(features, key: str) -> str:
    values = features[key].bytes_list.value if key in features else []
    return values[0].decode("utf-8") if values else ""


def _one(features, key: str, where: str) -> bytes:
    values = features[key].bytes_list.value if key in features else []
    if len(values) != 1:
        raise DataError(f"{where}: {key} has {len(values)} values; expected one encoded image")
    return values[0]
