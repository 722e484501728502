"""YOLO detection data in Ultralytics' layout: `data.yaml` naming the classes (`names`, a list or an
{index: name} mapping), `images/` and `labels/` beside it, one `labels/<same path>.txt` per image with
`class cx cy w h` lines normalized to the image. An image without a label file has no object.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import yaml

from edge.files.bounded import MAX_LABELS_BYTES, read_regular

from pipeline.tasks.detect.data.examples import DetExample, DetSource, check_unique, make_example
from pipeline.errors import DataError

MAX_DATA_YAML_BYTES = 1 << 20  # a data.yaml names classes and folders: a few KB
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}


def read_yolo(path) -> DetSource:
    path = Path(path)
    labels = _class_names(path)
    examples = read_labelled(path, len(labels), _box_line)
    check_unique(examples, str(path))
    return DetSource(str(path), "yolo", labels, examples)


def _box_line(where: str, fields: List[str], line: str) -> Tuple[int, Sequence[float], None]:
    if len(fields) != 5:
        raise DataError(f"{where}: {len(fields)} fields ({line.strip()!r}); expected 5: class cx cy w h")
    try:
        return int(fields[0]), [float(v) for v in fields[1:]], None
    except ValueError as err:
        raise DataError(f"{where}: {line.strip()!r} is not numbers; expected an integer class and "
                        "4 numbers cx cy w h") from err


# (where, the line's fields, the line) -> (class, (cx, cy, w, h), what else the line says of the object)
LineReader = Callable[[str, List[str], str], Tuple[int, Sequence[float], object]]
# (the image's example, what the lines said beyond each box, each object's "file, line N") -> the example kept
Finish = Callable[[DetExample, list, List[str]], object]


def read_labelled(path: Path, num_classes: int, read_line: LineReader, finish: Optional[Finish] = None) -> list:
    """Every image under the images/ folder beside `path` (sorted), with its boxes and classes from labels/<same
    path>.txt, one object a line as `read_line` reads it; each image's example as `finish` makes it of the detection
    example and the lines' other values (the detection example itself without `finish`)."""
    root = path.parent
    images_dir = root / "images"
    if not images_dir.is_dir():
        raise DataError(f"{path}: no images/ folder beside it; expected Ultralytics' images/ + labels/ layout")
    examples = []
    for image in sorted(p for p in images_dir.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES):
        label_file = root / "labels" / image.relative_to(images_dir).with_suffix(".txt")
        boxes, classes, others, names = [], [], [], []
        if label_file.is_file():
            for number, line in enumerate(_text(label_file, MAX_LABELS_BYTES, "a YOLO label file").splitlines(), start=1):
                fields = line.split()
                if not fields:
                    continue
                where = f"{label_file}, line {number}"
                cls, (cx, cy, w, h), other = read_line(where, fields, line)
                boxes.append((cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2))
                classes.append(cls)
                others.append(other)
                names.append(where)
        example = make_example(image.relative_to(root).as_posix(), image.read_bytes(), boxes, classes, num_classes,
                               str(image), names)
        examples.append(finish(example, others, names) if finish else example)
    if not examples:
        raise DataError(f"{images_dir}: no images; expected JPEG or PNG files")
    return examples


def _class_names(path: Path) -> List[str]:
    text = _text(path, MAX_DATA_YAML_BYTES, "a YOLO data.yaml")
    try:
        # An alias is expanded in place: a few hundred bytes of nested aliases become gigabytes. A data.yaml
        # needs none, so any is refused before the document is built.
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise DataError(f"{path}: uses YAML aliases (*name); expected a plain data.yaml without anchors or aliases")
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise DataError(f"{path}: not YAML ({str(err).splitlines()[0]}); expected a YOLO data.yaml") from err
    names = doc.get("names") if isinstance(doc, dict) else None
    if isinstance(names, dict) and not all(isinstance(k, int) and not isinstance(k, bool) for k in names):
        raise DataError(f"{path}: names has keys {sorted(map(repr, names))[:5]}; expected whole numbers 0, 1, 2, ...")
    if isinstance(names, dict) and sorted(names) == list(range(len(names))):
        return [str(names[i]) for i in range(len(names))]
    if isinstance(names, list) and names:
        return [str(n) for n in names]
    raise DataError(f"{path}: names is {names!r}; expected the class names as a list or as {{0: name, 1: name, ...}}")


def _text(path: Path, cap: int, expected: str) -> str:
    """A small UTF-8 text file, read once with a size cap; DataError naming it otherwise."""
    try:
        return read_regular(path, cap, "file", DataError).decode("utf-8")
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror}); expected {expected}") from err
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 text (byte {err.start}); expected {expected} in UTF-8") from None


def write_yolo(source: DetSource, folder) -> Path:
    """Write `source` in the layout above under `folder` (images at their ids' paths under images/)."""
    folder = Path(folder)
    for e in source.examples:
        relative = Path(e.id)
        if relative.parts[0] == "images":
            relative = Path(*relative.parts[1:])
        image = folder / "images" / relative
        image.parent.mkdir(parents=True, exist_ok=True)
        image.write_bytes(e.image)
        label = folder / "labels" / relative.with_suffix(".txt")
        label.parent.mkdir(parents=True, exist_ok=True)
        label.write_text("".join(f"{c} {(x0 + x1) / 2:.6f} {(y0 + y1) / 2:.6f} {x1 - x0:.6f} {y1 - y0:.6f}\n"
                                 for (y0, x0, y1, x1), c in zip(e.boxes.tolist(), e.classes.tolist())))
    path = folder / "data.yaml"
    path.write_text(yaml.safe_dump({"path": ".", "train": "images", "val": "images",
                                    "names": dict(enumerate(source.labels))}), encoding="utf-8")
    return path
