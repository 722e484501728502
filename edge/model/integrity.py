"""Check that a model file is the one that passed parity, before any interpreter loads it.

    from edge.model.integrity import find_records, verify
    records = find_records(Path("run/model_int8_edgetpu.tflite"))
    verify(model_path, model_bytes, records)            # IntegrityError on a mismatch

Two records can vouch for a model:
  sidecar   `<model file>.json` next to the model (edge/model/sidecar.py: its format, writer and reader)
  manifest  `manifest.json` in the model's directory (the run directory the pipeline wrote, or a bundle):
            {"schema_version": 1, "artifacts": {key: {"path": "<relative>", "sha256": "<hex>"}}, "labels": [...],
             "preprocessing": {...}}
A present manifest that does not list the model (and no sidecar) is refused: a device must not
run a model nobody recorded. No record at all is allowed; the CLI says the hash was not checked.
A manifest artifact entry's own "preprocessing" (an int8 model's differs from the run's) wins over the
manifest-wide one, which older runs have alone.

A model exported by edgeflow also carries its record inside (edge.model.metadata.embedded_record):
`metadata_record` reads it as a third kind of record that vouches for nothing (it cannot hold its own
file's hash) but gives the contract and labels, and `check_agreement` refuses a sidecar or manifest that
says otherwise.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Union

from edge.documents.schema import MANIFEST_NAME, load
from edge.errors import IntegrityError
# The sidecar's names, where the stages and tests have always found them.
from edge.model.sidecar import hex_digest, read_sidecar, sha256_bytes, sidecar_path, sidecar_record, write_sidecar

__all__ = ["MANIFEST_NAME", "MANIFEST_SCHEMA_VERSION", "ModelRecord", "check_agreement", "find_records", "metadata_record",
           "recorded_labels", "sha256_bytes", "sidecar_path", "sidecar_record", "verify", "write_sidecar"]

MANIFEST_SCHEMA_VERSION = 1  # of a run's manifest.json (pipeline/rundir/manifest.py writes it), and so of a bundle's


class ModelRecord(NamedTuple):
    source: Union[Path, str]  # the sidecar or manifest that holds the record (a description, for the model's metadata)
    kind: str  # "sidecar", "manifest" or "metadata"
    sha256: str  # "" for "metadata": a file cannot hold its own hash
    labels: Optional[List[str]]
    image_size: Optional[int]
    preprocessing: Optional[Dict[str, Any]]  # the pixel contract (edge.pixels.contract reads it), when recorded


def _sidecar_record(model: Path) -> Optional[ModelRecord]:
    sidecar = read_sidecar(model)
    if sidecar is None:
        return None
    return ModelRecord(sidecar.path, "sidecar", sidecar.sha256, sidecar.labels, sidecar.image_size, sidecar.preprocessing)


def _manifest_record(model: Path) -> Optional[ModelRecord]:
    """The manifest's record of `model`; None when there is no manifest; IntegrityError when it omits the model."""
    path = model.parent / MANIFEST_NAME
    if not path.is_file():
        return None
    obj = load(path, "manifest", MANIFEST_SCHEMA_VERSION, IntegrityError, "the manifest.json `pipeline` writes")
    artifacts = obj.get("artifacts")
    if not isinstance(artifacts, dict):
        raise IntegrityError(f"manifest {path} has no artifacts table, expected {{\"artifacts\": {{key: {{path, sha256}}}}}}")
    target = model.resolve()
    for key, entry in artifacts.items():
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            if (path.parent / entry["path"]).resolve() == target:
                return ModelRecord(path, "manifest", hex_digest(entry.get("sha256"), path), obj.get("labels"), obj.get("image_size"),
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


def metadata_record(model: Path, data: bytes, meta=None) -> Optional[ModelRecord]:
    """The record packed in the model's own TFLite metadata, as a ModelRecord that vouches for no hash; None when absent.
    `meta`: the model's ModelMetadata when the caller has read it already."""
    from edge.model.metadata import EDGEFLOW_RECORD, embedded_record

    record = embedded_record(data, Path(model).name, meta)
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
