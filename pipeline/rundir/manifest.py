"""Reading and writing `RUN/manifest.json`, the only interface between stages.

It records what each stage wrote (path relative to RUN, sha256) and the facts the next stage needs
(labels, image size, preprocessing, data split, metrics). Stages do not use this module directly:
they read and write through `pipeline.rundir.run.Run`, which holds the table of artifacts.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict

from pipeline.errors import ManifestError
from pipeline.rundir.files import write_json_atomic

MANIFEST_NAME = "manifest.json"
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
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ManifestError(f"{path} is not valid JSON ({err}); expected the manifest written by `pipeline train`") from err
    version = manifest.get("schema_version") if isinstance(manifest, dict) else None
    if version != SCHEMA_VERSION:
        raise ManifestError(f"{path} has schema_version {version!r}, expected {SCHEMA_VERSION}")
    return manifest


def save(run_dir: Path, manifest: Dict[str, Any]) -> Path:
    """Write the manifest atomically."""
    manifest["updated"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return write_json_atomic(Path(run_dir) / MANIFEST_NAME, manifest)
