"""The sidecar: `<model file>.json` next to a model, saying which model it is and how to feed it.

    {"schema_version": 1, "model": "<file name>", "sha256": "<hex>", "labels": [...],
     "image_size": N, "input": {"dtype": "uint8", "scale": s, "zero_point": z},
     "preprocessing": <the pixel contract, edge.pixels.contract.PixelContract.as_record()>}

Written by `pipeline export` and `pipeline compile` (and by whoever ships a model without its run
directory: `write_sidecar`), read by every edge command before the model is loaded (edge.model.integrity).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

from edge.files.atomic import write_json_atomic
from edge.documents.schema import load
from edge.errors import IntegrityError

SCHEMA_VERSION = 1


class Sidecar(NamedTuple):
    path: Path
    sha256: str  # lower-case hex
    labels: Optional[List[str]]
    image_size: Optional[int]
    preprocessing: Optional[Dict[str, Any]]  # the pixel contract (edge.pixels.contract reads it), when recorded


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sidecar_path(model: Path) -> Path:
    return model.with_name(model.name + ".json")


def sidecar_record(model_name: str, model_bytes: bytes, labels: Optional[List[str]] = None, **facts: Any) -> Dict[str, Any]:
    """What `<model>.json` holds: the schema version, the model's name and sha256, its labels and any facts."""
    obj: Dict[str, Any] = {"schema_version": SCHEMA_VERSION, "model": model_name, "sha256": sha256_bytes(model_bytes)}
    if labels is not None:
        obj["labels"] = list(labels)
    obj.update(facts)
    return obj


def write_sidecar(model: Path, labels: Optional[List[str]] = None, **facts: Any) -> Path:
    """Write `<model>.json` for `model` (the compile stage, tests, whoever ships a model without its run directory)."""
    model = Path(model)
    return write_json_atomic(sidecar_path(model), sidecar_record(model.name, model.read_bytes(), labels, **facts))


def read_sidecar(model: Path) -> Optional[Sidecar]:
    """The sidecar of `model`, checked (schema version, the model it names, its sha256's form); None when there is none."""
    path = sidecar_path(Path(model))
    if not path.is_file():
        return None
    obj = load(path, "sidecar", SCHEMA_VERSION, IntegrityError, "the sidecar `pipeline export` writes")
    if obj.get("model") != Path(model).name:
        raise IntegrityError(f"sidecar {path} describes model {obj.get('model')!r}, expected {Path(model).name!r}")
    return Sidecar(path, hex_digest(obj.get("sha256"), path), obj.get("labels"), obj.get("image_size"), obj.get("preprocessing"))


def hex_digest(value: Any, where: Path) -> str:
    """A recorded sha256, lower-cased; IntegrityError naming `where` when it is not 64 hex digits."""
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value.lower())):
        raise IntegrityError(f"{where} records sha256 {value!r}, expected 64 hex digits")
    return value.lower()
