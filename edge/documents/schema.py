"""The JSON documents that cross between host and device, and the one check of their schema version.

Each document has one module holding its writer, its reader and its schema version:

    edge/documents/bundle.py       bundle.json and the bundle's manifest.json   `pipeline parity --bundle` -> `edge evaluate`
    edge/documents/predictions.py  the predictions document                     `edge evaluate --out` -> `pipeline parity --device-results`
    edge/documents/latency.py      the latency document                         `edge bench --json` -> `pipeline report --latency`
    edge/model/sidecar.py      <model>.json next to a model                 `pipeline export|compile` -> every edge command
    edge/model/integrity.py    a run's manifest.json, as the device reads it (its writer is the run directory's)

Every reader opens its file with `load` (or checks an object it already holds with `check_version`): a file
this edgeflow cannot read is refused naming the file, its version and the version this edgeflow reads.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Type

from edge.files.bounded import MAX_DOCUMENT_BYTES, loads_json, read_regular
from edge.errors import EdgeError

MANIFEST_NAME = "manifest.json"  # a run's manifest, and a bundle's, sit under this name next to their models


def load(path: Path, what: str, reads: int, error: Type[EdgeError], expected: str, older: Optional[str] = None) -> Dict[str, Any]:
    """The JSON object in `path` when its schema version is `reads`; `error` otherwise.

    `what` names the document ("sidecar"), `expected` says what should be there ("the file `edge bench --json`
    writes"), `older` what to do about a file an older edgeflow made (None: it is refused like any other)."""
    try:
        data = read_regular(path, MAX_DOCUMENT_BYTES, what, error)
    except OSError as err:
        raise error(f"cannot read {what} {path} ({err}); expected {expected}") from err
    obj = loads_json(data, f"{what} {path}", error, expected)
    return check_version(obj, path, what, reads, error, expected, older)


def check_version(obj: Any, path: Path, what: str, reads: int, error: Type[EdgeError], expected: str,
                  older: Optional[str] = None) -> Dict[str, Any]:
    """`obj` when it is a JSON object of schema version `reads`; `error` naming the file and both versions otherwise."""
    if not isinstance(obj, dict):
        raise error(f"{what} {path} holds a JSON {type(obj).__name__}; expected {expected}")
    got = obj.get("schema_version")
    if got == reads and not isinstance(got, bool):
        return obj
    said = f"{what} {path} has schema_version {got!r}, expected {reads} (what this edgeflow reads)"
    if isinstance(got, int) and not isinstance(got, bool) and got > reads:
        raise error(f"{said}: it was written by a newer edgeflow; update edgeflow on this machine")
    if isinstance(got, int) and not isinstance(got, bool) and 0 < got < reads and older:
        raise error(f"{said}: it was made by an older edgeflow: {older}")
    raise error(f"{said}; expected {expected}")
