"""Reading and writing `RUN/manifest.json`, the only interface between stages.

It records what each stage wrote (path relative to RUN, sha256) and the facts the next stage needs
(labels, image size, preprocessing, data split, metrics). Stages do not use this module directly:
they read and write through `pipeline.rundir.run.Run`, which holds the table of artifacts.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import PurePosixPath, Path
from typing import Any, Callable, Dict

from edge.files.bounded import MAX_DOCUMENT_BYTES, loads_json, read_regular
from edge.documents.schema import MANIFEST_NAME  # one name, on the host and the device
from pipeline.errors import ManifestError
from pipeline.rundir.files import json_bytes, write_bytes_atomic

SCHEMA_VERSION = 1


def new(**fields: Any) -> Dict[str, Any]:
    """A fresh manifest with the schema version and an empty artifact table."""
    manifest: Dict[str, Any] = {"schema_version": SCHEMA_VERSION, "artifacts": {}}
    manifest.update(fields)
    return manifest


def load(run_dir: Path) -> Dict[str, Any]:
    """Read RUN/manifest.json, refusing a missing, unreadable or other-schema manifest."""
    path = Path(run_dir) / MANIFEST_NAME
    if not path.is_file():
        raise ManifestError(f"{path} not found: {run_dir} is not a run directory (run `pipeline train --out {run_dir}` first)")
    try:
        data = read_regular(path, MAX_DOCUMENT_BYTES, "manifest", ManifestError)
    except OSError as err:
        raise ManifestError(f"cannot read {path} ({err}); expected the manifest written by `pipeline train`") from err
    manifest = loads_json(data, str(path), ManifestError, "the manifest written by `pipeline train`")
    version = manifest.get("schema_version") if isinstance(manifest, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise ManifestError(f"{path} has schema_version {version}: it was made by a newer edgeflow "
                            f"({_made_by(manifest)}), and this one reads {SCHEMA_VERSION}; update edgeflow")
    if version != SCHEMA_VERSION:
        raise ManifestError(f"{path} has schema_version {version!r}, expected {SCHEMA_VERSION}")
    check(manifest, path)
    return manifest


def _made_by(manifest: Dict[str, Any]) -> str:
    versions = manifest.get("versions")
    made = versions.get("edgeflow") if isinstance(versions, dict) else None
    return f"edgeflow {made}" if isinstance(made, str) else "its manifest does not say which version"


def save(run_dir: Path, manifest: Dict[str, Any]) -> Path:
    """Write the manifest alone, atomically (a stage writes it with its files, through Run.transaction)."""
    return write_bytes_atomic(Path(run_dir) / MANIFEST_NAME, encode(manifest))


def encode(manifest: Dict[str, Any]) -> bytes:
    """The manifest's bytes as a transaction commits them, stamped with the time."""
    manifest["updated"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return json_bytes(manifest)


# What every stage reads of a manifest (a stage's own facts, such as training.global_batch, it checks itself): a
# damaged one (valid JSON, edited or cut by hand) is refused here, naming the field, instead of failing later
# with a KeyError.
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _digest(value: Any) -> bool:
    return isinstance(value, str) and bool(_HEX64.match(value))


def _inside_run(value: Any) -> bool:
    return _text(value) and not PurePosixPath(value).is_absolute() and ".." not in PurePosixPath(value).parts


_REQUIRED: Dict[str, tuple] = {  # field -> (test, what was expected)
    "labels": (lambda v: isinstance(v, list) and bool(v) and all(_text(x) for x in v), "a non-empty list of class names"),
    "model": (lambda v: isinstance(v, dict), "a table with the model's image_size"),
    "model.image_size": (_count, "a positive number of pixels"),
    "artifacts": (lambda v: isinstance(v, dict), "a table {key: {\"path\": ..., \"sha256\": ...}}"),
}
_ENTRY: Dict[str, tuple] = {  # field of every artifact -> (test, expected, required)
    "path": (_inside_run, "the file's path inside the run directory", True),
    "sha256": (_digest, "a sha256 of 64 lowercase hex digits", True),
    "compiled_from": (_digest, "a sha256 of 64 lowercase hex digits", False),
    "preprocessing": (lambda v: isinstance(v, dict), "a pixel-contract table", False),
}
_MISSING = object()


def check(manifest: Dict[str, Any], path: Path) -> None:
    """Refuse a manifest whose required fields are missing or of the wrong kind, naming the first such field."""
    for field, (test, expected) in _REQUIRED.items():
        _check_field(path, field, _get(manifest, field), test, expected)
    for key, entry in manifest["artifacts"].items():
        if not isinstance(entry, dict):
            raise ManifestError(f"{path}: field artifacts.{key} is {_shown(entry)}; expected a table with path and sha256")
        for name, (test, expected, required) in _ENTRY.items():
            value = entry.get(name, _MISSING)
            if value is not _MISSING or required:
                _check_field(path, f"artifacts.{key}.{name}", value, test, expected)


def _get(manifest: Dict[str, Any], field: str) -> Any:
    value: Any = manifest
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _check_field(path: Path, field: str, value: Any, test: Callable[[Any], bool], expected: str) -> None:
    if value is _MISSING:
        raise ManifestError(f"{path}: field {field} is missing; expected {expected} (the manifest is damaged: "
                            "restore it or train the run again)")
    if not test(value):
        raise ManifestError(f"{path}: field {field} is {_shown(value)}; expected {expected} (the manifest is damaged: "
                            "restore it or train the run again)")


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
