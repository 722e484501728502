"""Data specs and TPU-ready input pipelines.

A data spec is one of:
  digits                      scikit-learn's 8x8 digits, shipped with the package (no download)
  'data/train-*.tfrec'        TFRecords in the Kaggle TPU flowers schema (image: JPEG bytes,
                              class: int64, id: bytes); local paths or gs:// via tf.io.gfile;
                              class names from a labels.txt beside them, else "0".."N-1"
  data/flowers/               a folder with one sub-folder of images per class

Every source becomes the same stream: (uint8 RGB image [S, S, 3], int32 label) in a fixed order.
Each example has an identity (its path in the folder, its record id, its digits index) and a
digest of its bytes. The held-out split is chosen per example by a seeded hash of its identity,
so adding a file moves no other file between splits; train records the identities (manifest
`data.identity`) and every later stage refuses data whose classes or examples changed.

Decoding and resizing mirror the pixel contract (edge/preprocess.py) in pure TensorFlow, so the
pipeline still runs on a TPU: JPEG with the accurate integer DCT at the contract's reduced scale,
bilinear resize with antialiasing. The difference that remains is measured in bench/results/pixel_contract.md.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from edge.errors import InputError
from edge.image_files import IMAGE_SUFFIXES
from edge.preprocess import load_image
from pipeline.errors import DataError

AUTOTUNE = tf.data.AUTOTUNE
TFRECORD_FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "id": tf.io.FixedLenFeature([], tf.string),
}
SPLITS = ("train", "heldout", "all")
LABELS_NAME = "labels.txt"  # class names, one a line, beside TFRecord shards (written by `pipeline prepare`)


@dataclass(frozen=True)
class Split:
    """Which examples are held out: recorded in the manifest so later stages evaluate on them."""

    heldout_fraction: float = 0.2  # share of examples held out when no --val-data is given
    seed: int = 1234  # seeds the per-example hash; same seed, same split


class Example(NamedTuple):
    """Who an example is, independent of its position in the data."""

    id: str  # path relative to the data folder, the record's id feature, or "digits/<index>"
    label: int
    digest: str  # sha256 (16 hex digits) of the example's bytes: a changed image is noticed


class Source:
    """One data spec, resolved: its class names, its examples, and a dataset factory."""

    def __init__(self, spec: str, kind: str, labels: List[str], examples: List[Example], records, original,
                 interleaved=None):
        self.spec = spec
        self.kind = kind  # digits | tfrecord | folder
        self.labels = labels
        self.examples = examples
        self._records = records  # () -> tf.data.Dataset of (raw, label), raw = pixels or encoded bytes
        self._original = original  # (indices) -> each example as stored: encoded bytes, or pixels for digits
        # () -> (position, raw, label) read from several files at once, in a fixed but mixed order; None = records
        self._interleaved = interleaved

    @property
    def num_examples(self) -> int:
        return len(self.examples)

    def describe(self) -> dict:
        return {"spec": self.spec, "kind": self.kind, "num_examples": self.num_examples, "num_classes": len(self.labels)}

    def indices(self, split: str, holdout: Optional[Split] = None) -> np.ndarray:
        """Positions of the examples in `split`, in data order."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r}, expected one of {SPLITS}")
        if split == "all":
            return np.arange(self.num_examples)
        heldout = heldout_mask(self.examples, holdout or Split())
        return np.flatnonzero(heldout if split == "heldout" else ~heldout)

    def dataset(self, image_size: int, split: str = "all", holdout: Optional[Split] = None) -> tf.data.Dataset:
        """(uint8 [S,S,3], int32 label) examples of `split`, in a fixed order, unbatched."""
        return self.dataset_at(image_size, self.indices(split, holdout))

    def dataset_at(self, image_size: int, indices: np.ndarray) -> tf.data.Dataset:
        """(uint8 [S,S,3], int32 label) of the examples at `indices` (ascending), unbatched."""
        if len(indices) == self.num_examples:
            return self._decoded(self._records(), image_size)
        return self._decoded(self._selected(self._records().enumerate(), indices), image_size)

    def training_dataset(self, image_size: int, indices: np.ndarray) -> tf.data.Dataset:
        """The examples at `indices` for training, where order does not matter (it is shuffled):
        TFRecord shards are read in parallel, interleaved, each record selected by its position."""
        if self._interleaved is None:
            return self.dataset_at(image_size, indices)
        positioned = self._interleaved().map(lambda i, raw, label: (i, (raw, label)))
        return self._decoded(self._selected(positioned, indices), image_size)

    def _selected(self, positioned: tf.data.Dataset, indices: np.ndarray) -> tf.data.Dataset:
        """(raw, label) of the (position, (raw, label)) elements whose position is in `indices`."""
        keep = np.zeros(self.num_examples, bool)
        keep[indices] = True
        keep_t = tf.constant(keep)  # a lookup, not Python, inside the graph: runs on a TPU host too
        return positioned.filter(lambda i, ex: tf.gather(keep_t, i)).map(lambda i, ex: ex)

    def _decoded(self, ds: tf.data.Dataset, image_size: int) -> tf.data.Dataset:
        decode = _DECODERS[self.kind]
        return ds.map(lambda raw, label: (decode(raw, image_size), label), num_parallel_calls=AUTOTUNE, deterministic=True)

    def count(self, split: str, holdout: Split) -> int:
        """Number of examples in `split`."""
        return len(self.indices(split, holdout))

    def originals(self, indices: Sequence[int]) -> List[Any]:
        """The examples at `indices` as stored (encoded image bytes; uint8 pixels for digits), checked
        against the digests taken when the source was opened."""
        items = self._original([int(i) for i in indices])
        for i, item in zip(indices, items):
            data = item.tobytes() if isinstance(item, np.ndarray) else item
            if _digest(data) != self.examples[int(i)].digest:
                raise DataError(f"{self.examples[int(i)].id} in {self.spec} changed while this stage ran; run the stage again")
        return items


def heldout_mask(examples: Sequence[Example], holdout: Split) -> np.ndarray:
    """True for held-out examples: a seeded hash of each identity, uniform in [0, 1), under the fraction."""
    def draw(example: Example) -> float:
        h = hashlib.sha256(f"{holdout.seed}:{example.id}".encode("utf-8")).digest()
        return int.from_bytes(h[:8], "big") / 2.0 ** 64

    return np.array([draw(e) < holdout.heldout_fraction for e in examples], dtype=bool)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _to_size(image, image_size: int):
    """Stretch to a static [S, S, 3] by the pixel contract: bilinear with antialiasing, rounded to uint8."""
    image = tf.image.resize(image, [image_size, image_size], method="bilinear", antialias=True)
    image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
    return tf.ensure_shape(image, [image_size, image_size, 3])


def _decode_pixels(raw, image_size):
    return _to_size(raw, image_size)


def _decode_encoded(raw, image_size):
    # Pixel contract v2: JPEG through the accurate integer DCT (TensorFlow's default is the fast one), at the
    # largest scale 1/k (k = 8, 4, 2, 1) with k <= height // size and k <= width // size: libjpeg's scaled
    # IDCT, as Pillow's draft decodes it on the device.
    def jpeg(ratio):
        return lambda: tf.io.decode_jpeg(raw, channels=3, dct_method="INTEGER_ACCURATE", ratio=ratio)

    def scaled_jpeg():
        shape = tf.io.extract_jpeg_shape(raw)  # [height, width, channels]
        k = tf.minimum(shape[0] // image_size, shape[1] // image_size)
        branch = tf.cast(k >= 2, tf.int32) + tf.cast(k >= 4, tf.int32) + tf.cast(k >= 8, tf.int32)
        return tf.switch_case(branch, [jpeg(1), jpeg(2), jpeg(4), jpeg(8)])  # `ratio` must be a Python int

    image = tf.cond(tf.io.is_jpeg(raw), scaled_jpeg,
                    lambda: tf.io.decode_image(raw, channels=3, expand_animations=False))
    return _to_size(image, image_size)


def training_pixels(raw: Any, image_size: int) -> np.ndarray:
    """One example as training's input pipeline turns it into pixels (encoded bytes, or uint8 pixels);
    for measuring it against the pixel contract."""
    decode = _decode_pixels if isinstance(raw, np.ndarray) else _decode_encoded
    return decode(tf.constant(raw), image_size).numpy()


_DECODERS = {"digits": _decode_pixels, "tfrecord": _decode_encoded, "folder": _decode_encoded}


# ---------------------------------------------------------------------------------------------
# Opening a spec


def open_source(spec: str, classes: Optional[Sequence[str]] = None) -> Source:
    """Resolve a data spec, checking it fully before any training starts: a bad spec, a missing
    feature or a corrupt image is a DataError that names the file and what was expected.

    `classes` (a run's class names) numbers a folder's classes by name, so held-out data with
    fewer classes keeps the run's class indices; a class the run does not know is refused.
    """
    if spec == "digits":
        return _digits()
    if any(ch in spec for ch in "*?[") or spec.endswith((".tfrec", ".tfrecord")) or spec.startswith("gs://"):
        return _tfrecords(spec, classes)
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
    examples = [Example(f"digits/{i:04d}", int(y), _digest(p.tobytes())) for i, (p, y) in enumerate(zip(pixels, labels))]
    return Source("digits", "digits", names, examples, lambda: tf.data.Dataset.from_tensor_slices((pixels, labels)),
                  lambda indices: [pixels[i] for i in indices])


def _tfrecords(pattern: str, classes: Optional[Sequence[str]]) -> Source:
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
            with tf.io.gfile.GFile(path, "r") as f:
                names = [line.strip() for line in f.read().splitlines()]
            while names and not names[-1]:
                names.pop()
            if not names or "" in names or len(set(names)) != len(names):
                raise DataError(f"{path} is not a list of class names (empty, blank or repeated lines); "
                                "expected one distinct name a line, line N naming class id N")
            found[path] = names
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
                _check_image(image, where)
                ident = feature["id"].bytes_list.value[0].decode("utf-8", "backslashreplace")
                if ident in seen:
                    raise DataError(f"{where} repeats id {ident!r} (first in {seen[ident]}); expected a unique id per record")
                seen[ident] = where
                examples.append(Example(ident, int(feature["class"].int64_list.value[0]), _digest(image)))
            per_file.append(index + 1)
        except tf.errors.OpError as err:
            raise DataError(f"{path}: cannot read record {index + 1} as a TFRecord ({err.message.splitlines()[0]})") from err
    if not examples:
        raise DataError(f"TFRecord files {files} hold no records")
    if min(e.label for e in examples) < 0:
        raise DataError(f"negative class id {min(e.label for e in examples)} in {files}; expected class ids 0..N-1")
    return examples, per_file


def _check_image(data: bytes, where: str) -> None:
    """The pixel contract's own check (edge.preprocess): what the device would refuse, training refuses too."""
    try:
        load_image(data, where)
    except InputError as err:
        raise DataError(str(err)) from err


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
            _check_image(data, str(image))
            paths.append(str(image))
            examples.append(Example(image.relative_to(root).as_posix(), names.index(class_dir.name), _digest(data)))
    labels = np.array([e.label for e in examples], np.int32)

    def records():
        ds = tf.data.Dataset.from_tensor_slices((paths, labels))
        return ds.map(lambda p, y: (tf.io.read_file(p), y), num_parallel_calls=AUTOTUNE, deterministic=True)

    return Source(str(root), "folder", names, examples, records, lambda indices: [Path(paths[i]).read_bytes() for i in indices])


# ---------------------------------------------------------------------------------------------
# Pipelines for training and evaluation


DEFAULT_CACHE_MB = 2048  # decoded training sets up to this size are kept in memory after the first epoch


def decoded_mb(count: int, image_size: int) -> float:
    """Memory the decoded examples take in the cache: uint8 pixels, plus the labels."""
    return count * (image_size * image_size * 3 + 4) / 1e6


def training_pipeline(ds: tf.data.Dataset, global_batch: int, seed: int, cache: bool = False) -> tf.data.Dataset:
    """Shuffled, repeated, batched with drop_remainder (static shapes for the TPU), prefetched.
    `cache`: keep the decoded examples in memory, so only the first epoch reads and decodes."""
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


def identity_record(train: Source, val: Optional[Source], holdout: Split) -> Dict[str, Any]:
    """What train records of its data: class names, a summary of the training examples and the
    held-out examples one by one, so later stages can name what changed."""
    train_ex = train.examples if val else [train.examples[i] for i in train.indices("train", holdout)]
    heldout = val.examples if val else [train.examples[i] for i in train.indices("heldout", holdout)]
    return {
        "classes": list(train.labels),
        "train": _summary(train_ex, len(train.labels)),
        "heldout": {**_summary(heldout, len(train.labels)), "examples": [list(e) for e in heldout]},
    }


def _summary(examples: Sequence[Example], num_classes: int) -> Dict[str, Any]:
    per_class = np.bincount([e.label for e in examples], minlength=num_classes).tolist()
    listing = json.dumps([list(e) for e in examples], separators=(",", ":")).encode("utf-8")
    return {"count": len(examples), "per_class": per_class, "sha256": hashlib.sha256(listing).hexdigest()}


def resolve_split(manifest: dict, split: str, spec: Optional[str] = None) -> Tuple[Source, np.ndarray]:
    """The source and example positions of a run's 'train' or 'heldout' split, after checking that
    the data is what training recorded (same classes, same examples, same bytes).

    `spec` replaces the recorded held-out data (`pipeline parity RUN --data SPEC`): its classes
    are matched to the run's by name and it is taken whole.
    """
    if split not in ("train", "heldout"):
        raise ValueError(f"split {split!r}, expected 'train' or 'heldout'")
    data, classes = manifest["data"], manifest["labels"]
    if spec is not None:
        source = open_source(spec, classes)
        return source, source.indices("all")
    recorded = data.get("identity")
    if recorded is None:
        raise DataError("the run records no data identity (it was trained by an earlier edgeflow, whose held-out split "
                        "this version cannot reproduce); train it again")
    if split == "heldout" and data.get("val"):
        source = open_source(data["val"]["spec"], classes)
        indices = source.indices("all")
    else:
        source = open_source(data["train"]["spec"])
        if source.labels != list(classes):
            raise DataError(f"the classes of {source.spec} changed since training: the run has {list(classes)}, "
                            f"the data now has {source.labels}; train again, or restore the data")
        indices = source.indices("all") if data.get("val") else source.indices(split, split_from_manifest(manifest))
    examples = [source.examples[i] for i in indices]
    if split == "heldout":
        _check_heldout(recorded["heldout"], examples, source.spec)
    else:
        _check_train(recorded["train"], examples, classes, source.spec)
    return source, indices


def _check_heldout(recorded: Dict[str, Any], examples: Sequence[Example], spec: str) -> None:
    was = {e[0]: tuple(e[1:]) for e in recorded["examples"]}
    now = {e.id: (e.label, e.digest) for e in examples}
    changes = [f"{name}: " + ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "") for name, ids in (
        ("added", sorted(set(now) - set(was))),
        ("removed", sorted(set(was) - set(now))),
        ("relabelled", sorted(i for i in set(now) & set(was) if now[i][0] != was[i][0])),
        ("changed content", sorted(i for i in set(now) & set(was) if now[i][1] != was[i][1])),
    ) if ids]
    if changes:
        raise DataError(f"the held-out examples of {spec} changed since training ({'; '.join(changes)}); "
                        "the parity and calibration of this run would no longer be about the data it was trained on: "
                        "restore the data, or train again")


def _check_train(recorded: Dict[str, Any], examples: Sequence[Example], classes: Sequence[str], spec: str) -> None:
    now = _summary(examples, len(classes))
    if now["sha256"] == recorded["sha256"]:
        return
    counts = [f"{c}: {a} -> {b}" for c, a, b in zip(classes, recorded["per_class"], now["per_class"]) if a != b]
    what = ("examples per class changed (" + ", ".join(counts[:5]) + ")") if counts else \
        "the same number of examples per class, but other files or other bytes"
    raise DataError(f"the training examples of {spec} changed since training: {what}; restore the data, or train again")


def load_split(manifest: dict, split: str, spec: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Images and labels of a run's 'train' or 'heldout' split, decoded as training decodes them."""
    source, indices = resolve_split(manifest, split, spec)
    return to_numpy(source.dataset_at(manifest["model"]["image_size"], indices))
