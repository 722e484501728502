"""Data specs and TPU-ready input pipelines.

A data spec is one of:
  digits                      scikit-learn's 8x8 digits, shipped with the package (no download)
  'data/train-*.tfrec'        TFRecords in the Kaggle TPU flowers schema (image: JPEG bytes,
                              class: int64, id: bytes); local paths or gs:// via tf.io.gfile
  data/flowers/               a folder with one sub-folder of images per class

Every source becomes the same stream: (uint8 RGB image [S, S, 3], int32 label) in a fixed order.
The held-out split is chosen per example by a stateless hash of (seed, index), so it is the same
in every stage and needs no Python inside the tf.data graph.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from pipeline.errors import DataError

AUTOTUNE = tf.data.AUTOTUNE
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
TFRECORD_FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "id": tf.io.FixedLenFeature([], tf.string),
}
SPLITS = ("train", "heldout", "all")


@dataclass(frozen=True)
class Split:
    """Which examples are held out: recorded in the manifest so later stages evaluate on them."""

    heldout_fraction: float = 0.2  # share of examples held out when no --val-data is given
    seed: int = 1234  # seeds the per-example hash; same seed, same split


class Source:
    """One data spec, resolved: its label names, example count, and a dataset factory."""

    def __init__(self, spec: str, kind: str, labels: List[str], num_examples: int, records):
        self.spec = spec
        self.kind = kind  # digits | tfrecord | folder
        self.labels = labels
        self.num_examples = num_examples
        self._records = records  # () -> tf.data.Dataset of (raw, label), raw = pixels or encoded bytes

    def describe(self) -> dict:
        return {"spec": self.spec, "kind": self.kind, "num_examples": self.num_examples, "num_classes": len(self.labels)}

    def dataset(self, image_size: int, split: str = "all", holdout: Optional[Split] = None) -> tf.data.Dataset:
        """(uint8 [S,S,3], int32 label) examples of `split`, in a fixed order, unbatched."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r}, expected one of {SPLITS}")
        ds = self._records()
        if split != "all":
            holdout = holdout or Split()
            keep_heldout = split == "heldout"
            ds = ds.enumerate().filter(
                lambda i, ex: tf.equal(_is_heldout(i, holdout), keep_heldout)
            ).map(lambda i, ex: ex)
        decode = _DECODERS[self.kind]
        return ds.map(lambda raw, label: (decode(raw, image_size), label), num_parallel_calls=AUTOTUNE, deterministic=True)

    def count(self, split: str, holdout: Split) -> int:
        """Number of examples in `split` (computed from the labels only, without decoding images)."""
        if split == "all":
            return self.num_examples
        flags = self._records().enumerate().map(lambda i, ex: _is_heldout(i, holdout))
        heldout = int(flags.reduce(tf.constant(0, tf.int64), lambda n, f: n + tf.cast(f, tf.int64)).numpy())
        return heldout if split == "heldout" else self.num_examples - heldout


def _is_heldout(index, holdout: Split):
    draw = tf.random.stateless_uniform([], seed=tf.stack([tf.constant(holdout.seed, tf.int64), tf.cast(index, tf.int64)]))
    return draw < holdout.heldout_fraction


def _to_size(image, image_size: int):
    """Bilinear resize to a static [S, S, 3] and round back to uint8, as a camera frame would be."""
    image = tf.image.resize(image, [image_size, image_size], method="bilinear")
    image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
    return tf.ensure_shape(image, [image_size, image_size, 3])


def _decode_pixels(raw, image_size):
    return _to_size(raw, image_size)


def _decode_encoded(raw, image_size):
    image = tf.io.decode_image(raw, channels=3, expand_animations=False)
    return _to_size(image, image_size)


_DECODERS = {"digits": _decode_pixels, "tfrecord": _decode_encoded, "folder": _decode_encoded}


# ---------------------------------------------------------------------------------------------
# Opening a spec


def open_source(spec: str) -> Source:
    """Resolve a data spec, checking it fully before any training starts: a bad spec, a missing
    feature or a corrupt image is a DataError that names the file and what was expected."""
    if spec == "digits":
        return _digits()
    if any(ch in spec for ch in "*?[") or spec.endswith((".tfrec", ".tfrecord")) or spec.startswith("gs://"):
        return _tfrecords(spec)
    if os.path.isdir(spec):
        return _folder(Path(spec))
    raise DataError(
        f"data spec {spec!r} is neither 'digits', a glob of TFRecord files, nor an existing folder of class sub-folders"
    )


def _digits() -> Source:
    from sklearn.datasets import load_digits  # ships with scikit-learn: no download

    digits = load_digits()
    # 0..16 grey levels -> 0..255 RGB pixels, like a camera frame.
    pixels = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    pixels = np.repeat(pixels[..., None], 3, axis=-1)
    labels = digits.target.astype(np.int32)
    names = [str(i) for i in range(10)]
    return Source("digits", "digits", names, len(labels), lambda: tf.data.Dataset.from_tensor_slices((pixels, labels)))


def _tfrecords(pattern: str) -> Source:
    files = sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise DataError(f"no TFRecord files match {pattern!r}; expected a glob such as 'data/train-*.tfrec'")

    def records():
        parsed = tf.data.TFRecordDataset(files).map(
            lambda r: tf.io.parse_single_example(r, TFRECORD_FEATURES), num_parallel_calls=AUTOTUNE, deterministic=True
        )
        return parsed.map(lambda ex: (ex["image"], tf.cast(ex["class"], tf.int32)))

    classes = _check_tfrecords(files)
    names = [str(i) for i in range(max(classes) + 1)]
    return Source(pattern, "tfrecord", names, len(classes), records)


def _check_tfrecords(files: List[str]) -> List[int]:
    """Parse and decode every record once, so a bad record fails here, named, and not mid-training."""
    classes: List[int] = []
    for path in files:
        index = -1
        try:
            for index, raw in enumerate(tf.data.TFRecordDataset(path)):
                example = tf.train.Example.FromString(raw.numpy())
                feature = example.features.feature
                for name in TFRECORD_FEATURES:
                    if name not in feature:
                        raise DataError(
                            f"{path}: record {index} has no feature {name!r}; expected features image (JPEG bytes), "
                            f"class (int64) and id (bytes) as in the Kaggle TPU flowers schema"
                        )
                if not feature["class"].int64_list.value:
                    raise DataError(f"{path}: record {index}: feature 'class' is not an int64")
                _check_image(feature["image"].bytes_list.value[0] if feature["image"].bytes_list.value else b"", f"{path}: record {index}")
                classes.append(int(feature["class"].int64_list.value[0]))
        except tf.errors.OpError as err:
            raise DataError(f"{path}: cannot read record {index + 1} as a TFRecord ({err.message.splitlines()[0]})") from err
    if not classes:
        raise DataError(f"TFRecord files {files} hold no records")
    if min(classes) < 0:
        raise DataError(f"negative class id {min(classes)} in {files}; expected class ids 0..N-1")
    return classes


def _check_image(data: bytes, where: str) -> None:
    try:
        image = tf.io.decode_image(data, channels=3, expand_animations=False)
    except (tf.errors.InvalidArgumentError, ValueError) as err:
        raise DataError(f"{where}: image cannot be decoded ({str(err).splitlines()[0][:200]}); expected a JPEG or PNG") from err
    if min(image.shape[:2]) < 1:
        raise DataError(f"{where}: image is empty")


def _folder(root: Path) -> Source:
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(class_dirs) < 2:
        raise DataError(f"{root} has {len(class_dirs)} class sub-folder(s); expected one sub-folder of images per class, at least 2")
    paths: List[str] = []
    labels: List[int] = []
    for label, class_dir in enumerate(class_dirs):
        images = sorted(p for p in class_dir.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
        if not images:
            raise DataError(f"class folder {class_dir} holds no images; expected files ending in {', '.join(IMAGE_EXTENSIONS)}")
        for image in images:
            _check_image(image.read_bytes(), str(image))
        paths += [str(p) for p in images]
        labels += [label] * len(images)
    names = [d.name for d in class_dirs]

    def records():
        ds = tf.data.Dataset.from_tensor_slices((paths, np.array(labels, np.int32)))
        return ds.map(lambda p, y: (tf.io.read_file(p), y), num_parallel_calls=AUTOTUNE, deterministic=True)

    return Source(str(root), "folder", names, len(paths), records)


# ---------------------------------------------------------------------------------------------
# Pipelines for training and evaluation


def training_pipeline(ds: tf.data.Dataset, global_batch: int, seed: int, cache: bool = False) -> tf.data.Dataset:
    """Shuffled, repeated, batched with drop_remainder (static shapes for the TPU), prefetched."""
    if cache:
        ds = ds.cache()
    ds = ds.shuffle(4096, seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(global_batch, drop_remainder=True).map(_as_model_input, num_parallel_calls=AUTOTUNE)
    return _with_options(ds).prefetch(AUTOTUNE)


def eval_pipeline(ds: tf.data.Dataset, batch: int) -> tf.data.Dataset:
    """Batches in order, keeping the last partial batch (evaluation must see every example)."""
    return _with_options(ds.batch(batch).map(_as_model_input, num_parallel_calls=AUTOTUNE)).prefetch(AUTOTUNE)


def _as_model_input(images, labels):
    # Models take raw pixel values as float32; the uint8 round trip already happened in decode.
    return tf.cast(images, tf.float32), labels


def _with_options(ds: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    # Shard by data, not by file: a handful of TFRecord files or an in-memory array must still
    # split evenly across workers.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    # Parse, select and decode are separate maps for clarity; fused, they cost a third less CPU
    # per example (measured in bench/results/train.md), which on a small host is training time.
    options.experimental_optimization.map_fusion = True
    return ds.with_options(options)


def to_numpy(ds: tf.data.Dataset) -> Tuple[np.ndarray, np.ndarray]:
    """All (images, labels) of an unbatched example stream as uint8 [N,S,S,3] and int32 [N]."""
    images, labels = [], []
    for x, y in ds.batch(256):
        images.append(x.numpy())
        labels.append(y.numpy())
    if not images:
        return np.zeros((0, 0, 0, 3), np.uint8), np.zeros((0,), np.int32)
    return np.concatenate(images), np.concatenate(labels)


# ---------------------------------------------------------------------------------------------
# What later stages read back


def split_from_manifest(manifest: dict) -> Split:
    split = manifest["data"]["split"]
    return Split(heldout_fraction=split["heldout_fraction"], seed=split["seed"])


def load_split(manifest: dict, split: str, spec: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Images and labels of a run's 'train' or 'heldout' split, exactly as training saw them.

    `spec` replaces the recorded held-out data (e.g. `pipeline parity RUN --data SPEC`); its
    label count must match the run's.
    """
    data = manifest["data"]
    image_size = manifest["model"]["image_size"]
    if spec is not None:
        source = open_source(spec)
        _check_labels(source, manifest)
        return to_numpy(source.dataset(image_size, "all"))
    if split == "heldout" and data.get("val"):
        source = open_source(data["val"]["spec"])
        return to_numpy(source.dataset(image_size, "all"))
    source = open_source(data["train"]["spec"])
    if split == "train" and data.get("val"):
        return to_numpy(source.dataset(image_size, "all"))
    return to_numpy(source.dataset(image_size, split, split_from_manifest(manifest)))


def _check_labels(source: Source, manifest: dict) -> None:
    if len(source.labels) > len(manifest["labels"]):
        raise DataError(
            f"data {source.spec!r} has {len(source.labels)} classes, the run was trained on {len(manifest['labels'])}"
        )
