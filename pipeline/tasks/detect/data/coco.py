"""COCO detection annotations (`annotations.json`, as Roboflow, CVAT and Label Studio export them).

Each image's `file_name` is looked for relative to the JSON's folder, then to each of `images` (`--images`,
in order). A name found in two folders must be the same file there: two different files are refused, not
chosen between. Class indices follow the categories sorted by id; boxes are COCO's [x, y, width, height]
in pixels.
"""
from __future__ import annotations

import filecmp
import json
import os
from pathlib import Path
from typing import List, Sequence

from edge.files.bounded import MAX_IMAGE_BYTES, loads_json, read_regular
from pipeline.tasks.detect.data.examples import DetSource, check_unique, image_size, make_example
from pipeline.errors import DataError

# COCO 2017's train annotations are 448 MB; the host reads them, not the board.
MAX_ANNOTATIONS_BYTES = 2 << 30


def read_coco(path, images: Sequence[str] = ()) -> DetSource:
    path = Path(path)
    try:
        data = read_regular(path, MAX_ANNOTATIONS_BYTES, "annotations file", DataError)
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror}); expected a COCO annotations.json") from err
    doc = loads_json(data, str(path), DataError, "a COCO annotations.json")
    for key in ("images", "annotations", "categories"):
        if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
            raise DataError(f"{path}: no {key!r} list; expected COCO's 'images', 'annotations' and 'categories'")

    categories = sorted(_field(c, "id", int, path, "category") for c in doc["categories"])
    names = {c["id"]: str(_field(c, "name", str, path, f"category {c['id']}")) for c in doc["categories"]}
    if len(set(categories)) != len(categories):
        raise DataError(f"{path}: a category id appears twice; expected each category once")
    index = {cid: i for i, cid in enumerate(categories)}

    listed = {}
    for im in doc["images"]:
        iid = _field(im, "id", (int, str), path, "image")
        if iid in listed:
            raise DataError(f"{path}: image id {iid!r} appears twice; expected each image id once")
        listed[iid] = im
    objects = {iid: [] for iid in listed}
    crowds = {iid: [] for iid in listed}  # iscrowd 1: regions COCOeval ignores, not objects
    for ann in doc["annotations"]:
        aid = ann.get("id", "?") if isinstance(ann, dict) else "?"
        iid = _field(ann, "image_id", (int, str), path, f"annotation {aid}")
        if iid not in listed:
            raise DataError(f"{path}: annotation {aid} refers to image {iid!r}, which is not in 'images'; "
                            "expected every annotation's image to be listed")
        cid = _field(ann, "category_id", int, path, f"annotation {aid}")
        if cid not in index:
            raise DataError(f"{path}: annotation {aid} has unknown category_id {cid}; expected one of {categories}")
        bbox = ann.get("bbox")
        if not (isinstance(bbox, list) and len(bbox) == 4
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox)):
            raise DataError(f"{path}: annotation {aid} has bbox {str(bbox)[:60]}; expected [x, y, width, height] in pixels")
        crowd = ann.get("iscrowd", 0)
        if crowd not in (0, 1) or isinstance(crowd, bool):
            raise DataError(f"{path}: annotation {aid} has iscrowd {crowd!r}; expected 0 or 1")
        (crowds if crowd else objects)[iid].append((aid, bbox, index[cid]))

    folders = [path.parent, *map(Path, images)]
    examples, files = [], {}
    for iid, im in listed.items():
        file_name = str(_field(im, "file_name", str, path, f"image {iid!r}"))
        parts = Path(file_name).parts
        if Path(file_name).is_absolute() or ".." in parts or not parts:
            raise DataError(f"{path}: image {iid!r} has file_name {file_name!r}; expected a path relative to the JSON's "
                            "folder (or an --images folder), without '..'")
        if Path(file_name).as_posix() in files:
            raise DataError(f"{path}: images {files[Path(file_name).as_posix()]!r} and {iid!r} are both {file_name!r}; "
                            "expected each file under one image id")
        files[Path(file_name).as_posix()] = iid
        found = _find(file_name, folders, f"{path}: image {iid!r} file {file_name!r}")
        data = read_regular(found, MAX_IMAGE_BYTES, "image", DataError)
        real = image_size(data, str(found))
        height, width = im.get("height", real[0]), im.get("width", real[1])
        if (height, width) != real:
            raise DataError(f"{path}: image {iid!r} is {width}x{height} in the JSON but {found} is "
                            f"{real[1]}x{real[0]}; expected the JSON to give the file's size")
        def normalized(rows):
            return [(y / height, x / width, (y + h) / height, (x + w) / width) for _, (x, y, w, h), _ in rows]

        example = make_example(file_name, data, normalized(objects[iid]), [c for *_, c in objects[iid]], len(categories),
                               f"{found}", [f"{path}: annotation {aid} (image {iid!r})" for aid, *_ in objects[iid]],
                               normalized(crowds[iid]), [c for *_, c in crowds[iid]],
                               [f"{path}: annotation {aid} (image {iid!r}, iscrowd)" for aid, *_ in crowds[iid]])
        examples.append(example)
    check_unique(examples, str(path))
    return DetSource(str(path), "coco", [names[c] for c in categories], examples)


def write_coco(source: DetSource, path) -> None:
    """Write `source` as annotations.json at `path`, its images beside it under their ids."""
    path = Path(path)
    images, annotations = [], []
    for n, e in enumerate(source.examples, start=1):
        target = path.parent / e.id
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(e.image)
        images.append({"id": n, "file_name": e.id, "width": e.width, "height": e.height})
        for (ymin, xmin, ymax, xmax), c in zip(e.boxes.tolist(), e.classes.tolist()):
            annotations.append({"id": len(annotations) + 1, "image_id": n, "category_id": int(c) + 1,
                                "bbox": [xmin * e.width, ymin * e.height, (xmax - xmin) * e.width, (ymax - ymin) * e.height],
                                "area": (xmax - xmin) * e.width * (ymax - ymin) * e.height, "iscrowd": 0})
    categories = [{"id": i + 1, "name": name} for i, name in enumerate(source.labels)]
    path.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}), encoding="utf-8")


def _find(file_name: str, folders: List[Path], what: str) -> Path:
    """The one file `file_name` names in `folders`; the same file found twice (a folder given twice, a link, an
    identical copy) is one file, two different ones are refused."""
    hits = [folder / file_name for folder in folders if (folder / file_name).is_file()]
    if not hits:
        raise DataError(f"{what} not found in {' or '.join(map(str, folders))}; expected file_name relative to the "
                        "JSON's folder or to an --images folder")
    for other in hits[1:]:
        if not (os.path.samefile(hits[0], other) or filecmp.cmp(hits[0], other, shallow=False)):
            raise DataError(f"{what} is in both {hits[0]} and {other}, and they differ; expected one file per file_name "
                            "(remove one, or leave out the --images folder that holds the wrong one)")
    return hits[0]


def _field(item, key, kind, path, what):
    value = item.get(key) if isinstance(item, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{path}: {what} has {key}={value!r}; expected {_kind(kind)}")
    return value


def _kind(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "an integer", str: "a string"}[k] for k in kinds)
