"""Check that a model file is the one that passed parity, before any interpreter loads it.

    from edge.integrity import find_records, verify
    records = find_records(Path("run/model_int8_edgetpu.tflite"))
    verify(model_path, model_bytes, records)            # IntegrityError on a mismatch

Two records can vouch for a model:
  sidecar   `<model file>.json` next to the model:
            {"schema_version": 1, "model": "<file name>", "sha256": "<hex>", "labels": [...],
             "image_size": N, "input": {"dtype": "uint8", "scale": s, "zero_point": z},
             "preprocessing": <the pixel contract, edge.contract.PixelContract.as_record()>}
  manifest  `manifest.json` in the model's directory (the run directory the pipeline wrote):
            {"schema_version": 1, "artifacts": {key: {"path": "<relative>", "sha256": "<hex>"}}, "labels": [...],
             "preprocessing": {...}}
A present manifest that does not list the model (and no sidecar) is refused: a device must not
run a model nobody recorded. No record at all is allowed; the CLI says the hash was not checked.
A manifest artifact entry's own "preprocessing" (an int8 model's differs from the run's) wins over the
manifest-wide one, which older runs have alone.

A model exported by edgeflow also carries its record inside (edge.model_metadata.embedded_record):
`metadata_record` reads it as a third kind of record that vouches for nothing (it cannot hold its own
file's hash) but gives the contract and labels, and `check_agreement` refuses a sidecar or manifest that
says otherwise.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Type, Union

from edge.atomic import write_json_atomic
from edge.errors import EdgeError, IntegrityError

SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"


class ModelRecord(NamedTuple):
    source: Union[Path, str]  # the sidecar or manifest that holds the record (a description, for the model's metadata)
    kind: str  # "sidecar", "manifest" or "metadata"
    sha256: str  # "" for "metadata": a file cannot hold its own hash
    labels: Optional[List[str]]
    image_size: Optional[int]
    preprocessing: Optional[Dict[str, Any]]  # the pixel contract (edge.contract reads it), when recorded


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sidecar_path(model: Path) -> Path:
    return model.with_name(model.name + ".json")


def load_record(path: Path, what: str, error: Type[EdgeError] = IntegrityError) -> Dict[str, Any]:
    """A JSON object the pipeline wrote (sidecar, manifest, bundle), refusing unreadable or other-schema files."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise error(f"{what} {path} is not readable JSON ({err}); expected the file the pipeline wrote") from err
    if not isinstance(obj, dict) or obj.get("schema_version") != SCHEMA_VERSION:
        got = obj.get("schema_version") if isinstance(obj, dict) else type(obj).__name__
        raise error(f"{what} {path} has schema_version {got!r}, expected {SCHEMA_VERSION}")
    return obj


def _hex(value: Any, where: Path) -> str:
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value.lower())):
        raise IntegrityError(f"{where} records sha256 {value!r}, expected 64 hex digits")
    return value.lower()


def _sidecar_record(model: Path) -> Optional[ModelRecord]:
    path = sidecar_path(model)
    if not path.is_file():
        return None
    obj = load_record(path, "sidecar")
    if obj.get("model") != model.name:
        raise IntegrityError(f"sidecar {path} describes model {obj.get('model')!r}, expected {model.name!r}")
    return ModelRecord(path, "sidecar", _hex(obj.get("sha256"), path), obj.get("labels"), obj.get("image_size"),
                       obj.get("preprocessing"))


def _manifest_record(model: Path) -> Optional[ModelRecord]:
    """The manifest's record of `model`; None when there is no manifest; IntegrityError when it omits the model."""
    path = model.parent / MANIFEST_NAME
    if not path.is_file():
        return None
    obj = load_record(path, "manifest")
    artifacts = obj.get("artifacts")
    if not isinstance(artifacts, dict):
        raise IntegrityError(f"manifest {path} has no artifacts table, expected {{\"artifacts\": {{key: {{path, sha256}}}}}}")
    target = model.resolve()
    for key, entry in artifacts.items():
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            if (path.parent / entry["path"]).resolve() == target:
                return ModelRecord(path, "manifest", _hex(entry.get("sha256"), path), obj.get("labels"), obj.get("image_size"),
                                   entry.get("preprocessing", obj.get("preprocessing")))
    listed = sorted(str(e.get("path")) for e in artifacts.values() if isinstance(e, dict))
    raise IntegrityError(
        f"{model.name} is not listed in {path} (it lists {', '.join(listed) or 'nothing'}); "
        "refusing a model that no record vouches for; pass --no-verify to run it anyway"
    )


def find_records(model: Path) -> List[ModelRecord]:
    """The sidecar and manifest records of `model` (sidecar first); [] when neither file exists."""
    model = Path(model)
    sidecar = _sidecar_record(model)
    try:
        manifest = _manifest_record(model)
    except IntegrityError:
        if sidecar is None:
            raise
        manifest = None  # the sidecar vouches for it; the manifest may belong to other models
    return [r for r in (sidecar, manifest) if r is not None]


def verify(model: Path, data: bytes, records: List[ModelRecord]) -> str:
    """Check `data` (the model's bytes) against every record; returns the sha256."""
    actual = sha256_bytes(data)
    for record in records:
        if actual != record.sha256:
            raise IntegrityError(
                f"{model} has sha256 {actual[:16]}…, {record.kind} {record.source} says {record.sha256[:16]}…: "
                "this is not the model that was recorded (damaged in transfer, or replaced); copy it again"
            )
    return actual


def metadata_record(model: Path, data: bytes) -> Optional[ModelRecord]:
    """The record packed in the model's own TFLite metadata, as a ModelRecord that vouches for no hash; None when absent."""
    from edge.model_metadata import EDGEFLOW_RECORD, embedded_record

    record = embedded_record(data, Path(model).name)
    if record is None:
        return None
    return ModelRecord(f"the TFLite metadata of {Path(model).name} ({EDGEFLOW_RECORD})", "metadata", "", record["labels"],
                       record.get("image_size"), record["preprocessing"])


def check_agreement(records: List[ModelRecord], embedded: Optional[ModelRecord]) -> None:
    """Refuse a sidecar or manifest whose pixel contract or labels contradict the model's own metadata, naming both."""
    if embedded is None:
        return
    for record in records:
        for what, theirs, ours in (("preprocessing", record.preprocessing, embedded.preprocessing),
                                   ("labels", record.labels, embedded.labels)):
            if theirs is None or theirs == ours:
                continue
            if isinstance(theirs, dict) and isinstance(ours, dict):
                keys = sorted(set(theirs) | set(ours), key=str)
                detail = "; ".join(f"{k} {theirs.get(k)!r} there, {ours.get(k)!r} in the model"
                                   for k in keys if theirs.get(k) != ours.get(k))
            else:
                detail = f"{theirs!r} there, {ours!r} in the model"
            raise IntegrityError(f"{record.kind} {record.source} contradicts {embedded.source} on {what}: {detail}; "
                                 "refusing to guess which is right (export the model again, or remove the stale record)")


def recorded_labels(records: List[ModelRecord]) -> Optional[List[str]]:
    for record in records:
        if record.labels:
            return [str(x) for x in record.labels]
    return None


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
