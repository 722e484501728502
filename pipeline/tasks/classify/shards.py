"""Class folders -> TFRecord shards in the Kaggle TPU flowers schema (`image` JPEG bytes, `class` int64,
`id` bytes) and labels.txt beside them: the classification task's `pipeline prepare`.

Each record's id is the image's path relative to the folder, so the held-out split (a hash of the id) and
the manifest's data identity are the same as training on the folder. JPEGs are stored byte for byte;
other images are re-encoded to JPEG, which changes their pixels.
"""
from __future__ import annotations

import io
import posixpath
from pathlib import Path
from typing import List, NamedTuple, Tuple

import numpy as np
import tensorflow as tf

from edge.pixels.preprocess import load_image
from pipeline import data as data_mod
from pipeline.errors import ConfigError, DataError

LABELS_NAME = data_mod.LABELS_NAME
SHARD_SUFFIX = ".tfrec"
_JPEG_MAGIC = b"\xff\xd8\xff"


class PrepareResult(NamedTuple):
    shards: List[str]  # paths (local or gs://) of the shards written
    labels_path: str
    count: int  # records written, checked by reading them back
    reencoded: int  # images that were not JPEG and were re-encoded
    pattern: str = ""  # the --data glob that trains on the shards


def write(config, folder: str, out: str) -> PrepareResult:
    """Write `folder`'s images as shuffled TFRecord shards and labels.txt into `out` (config: prepare.PrepareConfig)."""
    if not Path(folder).is_dir():
        raise DataError(f"{folder} is not a folder; expected a folder with one sub-folder of images per class")
    source = data_mod.open_source(str(folder))  # checks every image: a bad one is named before anything is written
    if source.kind != "folder":
        raise DataError(f"{folder} is not a folder of class folders")
    existing = [p for p in _glob(out, "*" + SHARD_SUFFIX)] + [p for p in [join_path(out, LABELS_NAME)] if tf.io.gfile.exists(p)]
    if existing:
        raise ConfigError(f"{out} already holds {', '.join(posixpath.basename(p) for p in existing[:3])}"
                          f"{' and more' if len(existing) > 3 else ''}; choose an empty --out (nothing was overwritten)")
    order = spread_order(np.array([e.label for e in source.examples]), config.seed)
    # The shard count from the files' sizes (re-encoded images change size a little); records are then
    # written one at a time, so a folder larger than memory can be prepared.
    total = sum((Path(folder) / e.id).stat().st_size for e in source.examples)
    chunks = np.array_split(order, max(1, int(np.ceil(total / (config.shard_mb * 1e6)))))
    created = not tf.io.gfile.exists(out)
    tf.io.gfile.makedirs(out)
    names = [join_path(out, f"{config.prefix}-{k:02d}-{len(chunk)}{SHARD_SUFFIX}") for k, chunk in enumerate(chunks)]
    written: List[str] = []
    reencoded = 0
    try:
        for name, chunk in zip(names, chunks):
            temporary = name + ".partial"
            written.append(temporary)
            with tf.io.TFRecordWriter(temporary) as writer:
                for index in chunk:
                    example = source.examples[index]
                    (data,) = source.originals([index])  # checked against the digest taken when it was opened
                    if not data.startswith(_JPEG_MAGIC):
                        data = _to_jpeg(data, example.id, config.jpeg_quality)
                        reencoded += 1
                    writer.write(data_mod.encode_record(data, example.label, example.id))
            _check_written(temporary, [source.examples[i].id for i in chunk])
        for name in names:
            tf.io.gfile.rename(name + ".partial", name)
            written.append(name)
        labels_path = join_path(out, LABELS_NAME)
        with tf.io.gfile.GFile(labels_path, "w") as f:  # last: shards without labels.txt are not a finished set
            f.write("\n".join(source.labels) + "\n")
    except BaseException:
        for path in written:
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)
        if created and not tf.io.gfile.listdir(out):
            tf.io.gfile.rmtree(out)  # a folder this run made and left empty
        raise
    return PrepareResult(names, labels_path, len(order), reencoded, join_path(out, "*" + SHARD_SUFFIX))


def spread_order(labels: np.ndarray, seed: int) -> np.ndarray:
    """A seeded shuffle in which every class is spread evenly along the order, so that each
    contiguous shard holds the classes in their overall proportions."""
    rng = np.random.default_rng(seed)
    position = np.empty(len(labels))
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        # Member j of a class of n sits at (j + jitter) / n: evenly spaced, in a random order.
        position[members] = (np.arange(len(members)) + rng.random(len(members))) / len(members)
    return np.argsort(position, kind="stable")


def _to_jpeg(data: bytes, name: str, quality: int) -> bytes:
    out = io.BytesIO()
    load_image(data, name).save(out, format="JPEG", quality=quality)
    return out.getvalue()


def _check_written(path: str, ids: List[str]) -> None:
    """Read the shard back: the count and the ids must be what was meant to be written."""
    got = [tf.train.Example.FromString(raw.numpy()).features.feature["id"].bytes_list.value[0].decode("utf-8")
           for raw in tf.data.TFRecordDataset(path)]
    if got != ids:
        raise DataError(f"{path} reads back {len(got)} records, expected {len(ids)} (the write did not complete)")


def join_path(out: str, name: str) -> str:
    return posixpath.join(out, name) if out.startswith("gs://") else str(Path(out) / name)


def _glob(out: str, pattern: str) -> Tuple[str, ...]:
    return tuple(tf.io.gfile.glob(join_path(out, pattern))) if tf.io.gfile.exists(out) else ()
