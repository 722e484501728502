"""The run directory's manifest: the only interface between stages.

`RUN/manifest.json` records what each stage wrote (path relative to RUN, sha256) and the facts the
next stage needs (labels, image size, preprocessing, data split, metrics). A stage reads the
artifacts it needs through `artifact_path`, which checks the sha256, so no stage guesses another
stage's file names and none works on a file that changed after it was recorded.

Artifact keys in use: saved_model, keras_model, labels, history (train); model_float,
model_int8, model_float16, model_dynamic_range, quantization_report (export); model_int8_edgetpu, edgetpu_report (compile);
parity_report (parity); latency (`pipeline report --latency`).
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict

from pipeline.errors import ManifestError
from pipeline.rundir.files import sha256_of, write_json_atomic

MANIFEST_NAME = "manifest.json"
SCHEMA_VERSION = 1

# Which command produces each artifact, for "run X first" messages.
_PRODUCER = {
    "saved_model": "pipeline train",
    "keras_model": "pipeline train",
    "labels": "pipeline train",
    "history": "pipeline train",
    "model_float": "pipeline export RUN",
    "model_int8": "pipeline export RUN --int8",
    "model_float16": "pipeline export RUN --float16",
    "model_dynamic_range": "pipeline export RUN --dynamic-range",
    "quantization_report": "pipeline export RUN --int8",
    "model_int8_edgetpu": "pipeline compile RUN",
    "edgetpu_report": "pipeline compile RUN",
    "parity_report": "pipeline parity RUN",
    "latency": "pipeline report RUN --latency FILE",
}


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


def record_artifact(manifest: Dict[str, Any], run_dir: Path, key: str, path: Path, **facts: Any) -> Dict[str, Any]:
    """Record `path` (inside run_dir) under `key` with its sha256 and any facts; returns the entry."""
    path = Path(path)
    rel = path.resolve().relative_to(Path(run_dir).resolve()).as_posix()
    entry = {"path": rel, "sha256": sha256_of(path), **facts}
    manifest.setdefault("artifacts", {})[key] = entry
    return entry


def forget_artifact(manifest: Dict[str, Any], key: str) -> None:
    """Drop `key` from the manifest (for a stage that is re-run and fails)."""
    manifest.get("artifacts", {}).pop(key, None)


def artifact_path(manifest: Dict[str, Any], run_dir: Path, key: str, verify: bool = True) -> Path:
    """The recorded path of `key`, after checking it exists and (by default) its sha256."""
    entry = manifest.get("artifacts", {}).get(key)
    if entry is None:
        producer = _PRODUCER.get(key, "the stage that writes it")
        raise ManifestError(f"{run_dir} has no {key!r} recorded in its manifest; run `{producer}` first")
    path = Path(run_dir) / entry["path"]
    if not path.exists():
        raise ManifestError(f"{key!r} is recorded as {entry['path']} but {path} does not exist")
    if verify:
        actual = sha256_of(path)
        if actual != entry["sha256"]:
            raise ManifestError(
                f"{path} changed after it was recorded: sha256 {actual[:12]}…, manifest says {entry['sha256'][:12]}…; "
                f"re-run `{_PRODUCER.get(key, 'its stage')}` or restore the file"
            )
    return path


def contract(manifest: Dict[str, Any]) -> Dict[str, Any]:
    """The run's pixel contract (edge.preprocess): how images become the model's input, on every side."""
    recorded = manifest.get("preprocessing")
    if not isinstance(recorded, dict):
        raise ManifestError("the run records no pixel contract (it was trained by an earlier edgeflow); train it again")
    return recorded


def check_compiled_is_current(manifest: Dict[str, Any], key: str) -> None:
    """Refuse a compiled model whose int8 source has been re-exported since it was compiled."""
    entry = manifest["artifacts"][key]
    source = manifest["artifacts"].get("model_int8", {}).get("sha256")
    if "compiled_from" in entry and entry["compiled_from"] != source:
        raise ManifestError(
            f"{entry['path']} was compiled from an earlier int8 model (sha256 {entry['compiled_from'][:12]}…, "
            f"the run's is now {str(source)[:12]}…); run `pipeline compile RUN` again"
        )
