"""Data to predict on (`pipeline predict --data SPEC`): every input with its identity, in order; labels not needed.

A spec is one of
  'test/*.tfrec'    TFRecords in the Kaggle TPU schema (tfrecords.py) with `image` and `id`; `class` may be
                    missing (Kaggle's test shards) and is ignored when present. Identity: the record's id.
  photos/           a folder of images, flat or in sub-folders whose names are ignored (class folders).
                    Identity: the path relative to the folder, with '/'.
  cat.jpg, 'a/*.png'  image files, or a glob matching only image files. Identity: the path as given (as matched).
Local paths or gs:// (tf.io.gfile lists and reads both). Several specs are read one after the other.

`open_inputs` lists the inputs and reads every record's id (no image is decoded yet), and names the
inputs that cannot be predicted: a record with no id or no image, an id already seen. Which images
cannot be decoded is found by whoever decodes them (pipeline.predict).
"""
from __future__ import annotations

from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from edge.pixels.image_files import IMAGE_SUFFIXES
from pipeline.data.decode import DECODERS
from pipeline.data.examples import AUTOTUNE
from pipeline.data.tfrecords import identified_records, positioned_images
from pipeline.errors import DataError

TFRECORD_SUFFIXES = (".tfrec", ".tfrecord", ".tfrecords")
SHOWN = 10  # refused inputs named in the error; the count says how many more


class Item(NamedTuple):
    id: Optional[str]  # the identity written to the output; None: the record has none
    where: str  # for messages: "shard.tfrec record 3", or the image file's path
    path: str  # the file that holds it: a shard or an image file
    record: Optional[int]  # index of the record in its shard; None for an image file

    @property
    def name(self) -> str:
        """The input as messages name it: where it is, and its id when it is a record."""
        return self.where if self.record is None else f"{self.where} (id {self.id!r})"


class _Shards(NamedTuple):
    files: List[str]
    starts: List[int]  # position of each shard's first record among all inputs


class _Images(NamedTuple):
    paths: List[str]
    start: int  # position of the first image among all inputs


class Inputs:
    """Every input of the specs, in order, and what is wrong with some of them (position -> reason)."""

    def __init__(self, items: List[Item], problems: Dict[int, str], parts: List[object]):
        self.items = items
        self.problems = problems
        self._parts = parts  # _Shards and _Images, in input order

    def kept(self, problems: Dict[int, str]) -> np.ndarray:
        """A mask of the inputs to score: all but the positions in `problems`."""
        keep = np.ones(len(self.items), bool)
        keep[list(problems)] = False
        return keep

    def refuse_unless_skipping(self, problems: Dict[int, str], skip_bad: bool) -> None:
        """DataError naming the inputs in `problems` (the first SHOWN of them), unless --skip-bad was given."""
        if not problems or skip_bad:
            return
        named = [problems[i] for i in sorted(problems)[:SHOWN]]
        more = f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
        raise DataError(f"{len(problems)} of {len(self.items)} inputs cannot be predicted, nothing was written: "
                        f"{'; '.join(named)}{more}. Fix them, or give --skip-bad to predict the others and list these")

    def encoded(self, keep: np.ndarray) -> Iterator[Tuple[int, bytes]]:
        """(position, encoded image bytes) of the kept inputs, in order; shards are read once, front to back."""
        for part in self._parts:
            if isinstance(part, _Images):
                for i, path in enumerate(part.paths, part.start):
                    if keep[i]:
                        yield i, _read_bytes(path)
            else:
                for path, start in zip(part.files, part.starts):
                    for index, _, image in identified_records(path):
                        if keep[start + index]:
                            yield start + index, image

    def dataset(self, keep: np.ndarray) -> tf.data.Dataset:
        """(position int64, encoded image bytes) of the kept inputs for tf.data: shards read in parallel, so
        the order is mixed; each element carries its position."""
        parts = []
        for part in self._parts:
            if isinstance(part, _Images):
                positions = np.arange(part.start, part.start + len(part.paths), dtype=np.int64)
                parts.append(tf.data.Dataset.from_tensor_slices((positions, part.paths)).map(
                    lambda i, p: (i, tf.io.read_file(p)), num_parallel_calls=AUTOTUNE, deterministic=True))
            else:
                parts.append(positioned_images(part.files, part.starts))
        ds = parts[0]
        for more in parts[1:]:
            ds = ds.concatenate(more)
        keep_t = tf.constant(keep)  # a lookup in the graph, not Python: runs on a TPU host too
        return ds.filter(lambda i, raw: tf.gather(keep_t, i))


def decoded(ds: tf.data.Dataset, image_size: int) -> tf.data.Dataset:
    """(position, uint8 [S, S, 3]) from (position, encoded bytes), decoded as training decodes (decode.py)."""
    decode = DECODERS["tfrecord"]
    return ds.map(lambda i, raw: (i, decode(raw, image_size)), num_parallel_calls=AUTOTUNE, deterministic=True)


def open_inputs(specs: Sequence[str]) -> Inputs:
    """Resolve every spec, read every record's id, and name the inputs with no id, no image or a repeated id."""
    if not specs:
        raise DataError("no data to predict on: give --data SPEC (TFRecord glob, folder of images, or image files)")
    items: List[Item] = []
    problems: Dict[int, str] = {}
    parts: List[object] = []
    for spec in specs:
        kind, files = _resolve(spec)
        if kind in ("folder", "images"):
            parts.append(_Images(files, len(items)))
            for path in files:
                items.append(Item(_relative(spec, path) if kind == "folder" else path, path, path, None))
            continue
        starts = []
        for path in files:
            starts.append(len(items))
            for index, ident, image in identified_records(path):
                where = f"{path} record {index}"
                if image is None:
                    problems[len(items)] = f"{where} has no 'image' feature (expected JPEG bytes, as in the Kaggle TPU schema)"
                if ident is None:
                    problems[len(items)] = f"{where} has no 'id' feature (expected the record's id as bytes, as in Kaggle's test shards)"
                items.append(Item(ident, where, path, index))
        parts.append(_Shards(files, starts))
    if not items:
        raise DataError(f"{', '.join(specs)} hold no inputs; expected TFRecords with records, or image files")
    first: Dict[str, int] = {}
    for i, item in enumerate(items):
        if item.id is None:
            continue
        if item.id in first:
            problems.setdefault(i, f"{item.where} repeats id {item.id!r} (first at {items[first[item.id]].where}); "
                                   "expected one input per id")
        else:
            first[item.id] = i
    return Inputs(items, problems, parts)


def _resolve(spec: str) -> Tuple[str, List[str]]:
    """("records" | "folder" | "images", files) of one spec; DataError when it names nothing usable."""
    if tf.io.gfile.isdir(spec):
        images = _folder_images(spec)
        if not images:
            raise DataError(f"folder {spec} holds no images; expected files ending in {', '.join(IMAGE_SUFFIXES)}, "
                            "flat or in sub-folders")
        return "folder", images
    if any(ch in spec for ch in "*?["):
        files = sorted(f for f in tf.io.gfile.glob(spec) if not tf.io.gfile.isdir(f))
        if not files:
            raise DataError(f"no files match {spec!r}; expected a glob of TFRecord shards such as 'test/*.tfrec', "
                            "or of image files")
        return ("images" if all(_is_image_name(f) for f in files) else "records"), files
    if tf.io.gfile.exists(spec):
        if _is_image_name(spec):
            return "images", [spec]
        if spec.lower().endswith(TFRECORD_SUFFIXES):
            return "records", [spec]
        raise DataError(f"{spec} is neither an image ({', '.join(IMAGE_SUFFIXES)}) nor a TFRecord shard "
                        f"({', '.join(TFRECORD_SUFFIXES)})")
    raise DataError(f"data spec {spec!r}: no such file or folder; expected a TFRecord glob, a folder of images, or image files")


def _folder_images(root: str) -> List[str]:
    """Image files under `root` at any depth, hidden files and folders left out, sorted by relative path."""
    found = []
    for folder, subdirs, names in tf.io.gfile.walk(root):
        subdirs[:] = [d for d in subdirs if not d.rstrip("/").startswith(".")]
        rel = _relative(root, folder)
        if any(part.startswith(".") for part in rel.split("/") if part):
            continue
        found.extend(_join(folder, n) for n in names if not n.startswith(".") and _is_image_name(n))
    return sorted(found, key=lambda path: _relative(root, path))


def _relative(root: str, path: str) -> str:
    root = root.rstrip("/")
    return path[len(root):].lstrip("/") if path.startswith(root) else path


def _join(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def _is_image_name(path: str) -> bool:
    return any(path.lower().endswith(suffix) for suffix in IMAGE_SUFFIXES)


def _read_bytes(path: str) -> bytes:
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read()
    except tf.errors.OpError as err:
        raise DataError(f"cannot read {path}: {err.message.splitlines()[0]}") from err
