"""The evaluation bundle: held-out images and the models to run on them, carried from the host to a device.

    pipeline parity RUN --bundle DIR                                       (writes it, through `write_bundle`)
    edge evaluate DIR/model_int8_edgetpu.tflite --data DIR --out predictions.json --edgetpu   (reads it: `read_bundle`)

    DIR/bundle.json     {"schema_version": 2, "labels": [...],
                         "images": [{"file": "heldout/00000.jpg", "id": ..., "label": ..., "sha256": ...}, ...]}
    DIR/heldout/        the held-out images byte for byte as stored (a JPEG stays that JPEG, so the device decodes
                        and resizes it itself); an array data set's images as PNG
    DIR/labels.txt      one class name per line
    DIR/<model files>   the run's int8 and Edge TPU models, with their sidecars
    DIR/manifest.json   the models' entries as the run records them (sha256, pixel contract), in a run manifest's
                        format so edge.model.integrity checks each model against it; its top-level contract is the
                        shipped models' (the int8 model's: mean 128, std 128)

Version 2: version 1 wrote the run's contract (the float model's, mean 0 and std 1) at the top of manifest.json,
next to models that take mean 128 and std 128; such a bundle is refused, with the command that writes a new one.
"""
from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

import numpy as np

from edge.files.atomic import write_json_atomic, write_text_atomic
from edge.files.bounded import MAX_IMAGE_BYTES, read_regular
from edge.files.confined import OutsideFolder, inside
from edge.pixels.contract import PixelContract
from edge.documents.schema import MANIFEST_NAME, load
from edge.errors import InputError
from edge.pixels.image_files import IMAGE_SUFFIXES
from edge.model.integrity import MANIFEST_SCHEMA_VERSION
from edge.model.sidecar import sha256_bytes, sidecar_path

BUNDLE_NAME = "bundle.json"
SCHEMA_VERSION = 2
_OLDER = "run `pipeline parity RUN --bundle DIR` again"
_EXPECTED = "the bundle.json `pipeline parity RUN --bundle DIR` writes"


class BundleImage(NamedTuple):
    file: str  # its path inside the bundle
    id: Optional[str]  # the example's identity in the run's data, for parity to match
    label: Optional[int]  # class index, None when unknown
    sha256: Optional[str]  # the file's bytes, checked against bundle.json's record when it has one


class Bundle(NamedTuple):
    folder: Path
    labels: Optional[List[str]]  # None when bundle.json lists none
    images: List[BundleImage]


class ShippedModel(NamedTuple):
    path: Path  # the model file in the run
    entry: Dict[str, Any]  # its manifest entry (sha256, pixel contract, ...); its path is rewritten for the bundle


def image_file(i: int, example_id: str, original: Any) -> Tuple[str, bytes]:
    """Held-out image `i` as the bundle holds it: (path in the bundle, bytes). The stored bytes as they are;
    an array data set's image, which has no file, as a PNG (lossless, and the same bytes for the same pixels)."""
    from PIL import Image

    if isinstance(original, np.ndarray):
        out = io.BytesIO()
        Image.fromarray(original).save(out, format="PNG")
        return f"heldout/{i:05d}.png", out.getvalue()
    return f"heldout/{i:05d}{_suffix(example_id, original)}", original


_FORMAT_SUFFIX = {"JPEG": ".jpg", "PNG": ".png", "GIF": ".gif", "BMP": ".bmp", "WEBP": ".webp"}


def _suffix(example_id: str, data: bytes) -> str:
    """The file name ending for an encoded image: its own when the id is a file name, else from its format."""
    from PIL import Image

    own = Path(example_id).suffix.lower()
    if own in IMAGE_SUFFIXES:
        return own
    with Image.open(io.BytesIO(data)) as image:
        return _FORMAT_SUFFIX.get(image.format or "", ".img")


def write_bundle(folder: Path, labels: List[str], contract: PixelContract, examples: Iterable[Tuple[str, int, Any]],
                 models: Dict[str, ShippedModel]) -> Path:
    """Fill the new folder `folder`: every (id, label, stored original) of `examples` as an image file, bundle.json,
    labels.txt, each model with its sidecar, and manifest.json with the models' entries under `contract`, the
    pixel contract the shipped models take."""
    folder = Path(folder)
    (folder / "heldout").mkdir(parents=True)
    entries = []
    for i, (example_id, label, original) in enumerate(examples):
        name, data = image_file(i, example_id, original)
        (folder / name).write_bytes(data)
        entries.append({"file": name, "id": example_id, "label": label, "sha256": sha256_bytes(data)})
    write_json_atomic(folder / BUNDLE_NAME, {"schema_version": SCHEMA_VERSION, "labels": list(labels), "images": entries})
    write_text_atomic(folder / "labels.txt", "\n".join(labels) + "\n")
    artifacts = {}
    for key, model in models.items():
        shutil.copy2(model.path, folder / model.path.name)
        sidecar = sidecar_path(model.path)
        if sidecar.exists():
            shutil.copy2(sidecar, folder / sidecar.name)
        artifacts[key] = {**model.entry, "path": model.path.name}  # every model sits at the bundle's top level
    # Only the model entries: the device checks each model's sha256 against this manifest.
    write_json_atomic(folder / MANIFEST_NAME, {"schema_version": MANIFEST_SCHEMA_VERSION, "labels": list(labels),
                                               "preprocessing": contract.as_record(), "artifacts": artifacts})
    return folder


def is_bundle(folder: Path) -> bool:
    return (Path(folder) / BUNDLE_NAME).is_file()


def read_bundle(folder: Path) -> Bundle:
    """bundle.json of `folder`, checked: its version, each image entry, and each listed file against its sha256."""
    folder = Path(folder)
    path = folder / BUNDLE_NAME
    bundle = load(path, "evaluation bundle", SCHEMA_VERSION, InputError, _EXPECTED, older=_OLDER)
    raw_labels = bundle.get("labels")
    if raw_labels is not None and not (isinstance(raw_labels, list) and all(isinstance(x, str) for x in raw_labels)):
        raise InputError(f"{path} has labels {_shown(raw_labels)}, expected a list of class names")
    labels = list(raw_labels or []) or None
    if not isinstance(bundle.get("images") or [], list):
        raise InputError(f"{path} has images {_shown(bundle.get('images'))}, expected a list of {{\"file\": ...}} entries")
    images = []
    for i, entry in enumerate(bundle.get("images") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise InputError(f"{path} images[{i}] is {_shown(entry)}, expected {{\"file\": ..., \"label\": ...}}")
        try:  # inside the bundle: no absolute path, no `..`, no symlink on the way
            inside(folder, entry["file"], f"{path} images[{i}] file")
        except OutsideFolder as err:
            raise InputError(str(err)) from None
        label = entry.get("label")
        if label is not None and not (isinstance(label, int) and not isinstance(label, bool) and label >= 0
                                      and (labels is None or label < len(labels))):
            raise InputError(f"{path} images[{i}] has label {label!r}, expected a class index below {len(labels or [])} or null")
        images.append(BundleImage(entry["file"], entry.get("id"), label, _checked_sha256(folder, entry, path)))
    if not images:
        raise InputError(f"{path} lists no images")
    return Bundle(folder, labels, images)


def verified_bytes(path: Path, sha256: str) -> bytes:
    """The bytes of a bundled image, read once, when they are the ones bundle.json records: the bytes hashed are the
    bytes decoded (an image replaced after `read_bundle` checked it is refused, not scored under the old hash)."""
    try:
        data = read_regular(path, MAX_IMAGE_BYTES, "bundled image", InputError)
    except FileNotFoundError:
        raise InputError(f"image {path} not found") from None
    except OSError as err:
        raise InputError(f"cannot read image {path}: {err.strerror or err}") from None
    actual = sha256_bytes(data)
    if actual != sha256:
        raise InputError(f"{path} has sha256 {actual[:12]}…, the bundle records {sha256[:12]}…: it changed while the bundle "
                         "was being evaluated; write a new bundle")
    return data


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _checked_sha256(folder: Path, entry: Dict[str, Any], bundle: Path) -> Optional[str]:
    """The bundled file's sha256 when it is the one bundle.json records; a file that changed is refused. A missing
    file is left to the scoring, which names it with the other unreadable images."""
    recorded, path = entry.get("sha256"), folder / entry["file"]
    if not path.exists():
        return recorded
    actual = sha256_bytes(read_regular(path, MAX_IMAGE_BYTES, "bundled image", InputError))  # no FIFO, no 6 GB file
    if recorded is not None and actual != recorded:
        raise InputError(f"{path} has sha256 {actual[:12]}…, {bundle} records {str(recorded)[:12]}…: the bundle changed after "
                         "`pipeline parity --bundle` wrote it; write a new bundle")
    return actual
