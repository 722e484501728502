"""The sha256 check: a sidecar or the run's manifest vouches for a model, or it is refused."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge.errors import IntegrityError
from edge.model.integrity import find_records, recorded_labels, sha256_bytes, verify, write_sidecar
from tests.support.edge_paths import LABELS


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_sidecar_matches_and_gives_labels(int8_copy: Path):
    write_sidecar(int8_copy, labels=LABELS, image_size=16)
    records = find_records(int8_copy)
    assert [r.kind for r in records] == ["sidecar"]
    assert verify(int8_copy, int8_copy.read_bytes(), records) == sha256_bytes(int8_copy.read_bytes())
    assert recorded_labels(records) == LABELS


def test_tampered_model_fails_against_sidecar(int8_copy: Path):
    write_sidecar(int8_copy, labels=LABELS)
    _flip_last_byte(int8_copy)
    with pytest.raises(IntegrityError, match=r"has sha256 [0-9a-f]{16}…, sidecar .* says [0-9a-f]{16}…"):
        verify(int8_copy, int8_copy.read_bytes(), find_records(int8_copy))


def _manifest(run: Path, rel: str, sha: str) -> None:
    manifest = {"schema_version": 1, "labels": LABELS, "artifacts": {"model_int8": {"path": rel, "sha256": sha}}}
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_manifest_record_resolves_relative_paths(int8_copy: Path):
    _manifest(int8_copy.parent, f"./sub/../{int8_copy.name}", sha256_bytes(int8_copy.read_bytes()))
    records = find_records(int8_copy)
    assert [r.kind for r in records] == ["manifest"] and recorded_labels(records) == LABELS
    verify(int8_copy, int8_copy.read_bytes(), records)
    _flip_last_byte(int8_copy)
    with pytest.raises(IntegrityError, match="manifest"):
        verify(int8_copy, int8_copy.read_bytes(), records)


def test_model_missing_from_a_present_manifest_is_refused(int8_copy: Path):
    _manifest(int8_copy.parent, "model_float.tflite", "0" * 64)
    with pytest.raises(IntegrityError, match="model_int8.tflite is not listed in .*model_float.tflite.*--no-verify"):
        find_records(int8_copy)
    write_sidecar(int8_copy)  # a sidecar vouches for it instead
    assert [r.kind for r in find_records(int8_copy)] == ["sidecar"]


def test_bad_records_say_what_was_expected(int8_copy: Path):
    sidecar = write_sidecar(int8_copy)
    obj = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps(dict(obj, model="other.tflite")))
    with pytest.raises(IntegrityError, match="describes model 'other.tflite', expected 'model_int8.tflite'"):
        find_records(int8_copy)
    sidecar.write_text(json.dumps(dict(obj, schema_version=7)))
    with pytest.raises(IntegrityError, match="schema_version 7, expected 1"):
        find_records(int8_copy)
    sidecar.write_text(json.dumps(dict(obj, sha256="abc")))
    with pytest.raises(IntegrityError, match="expected 64 hex digits"):
        find_records(int8_copy)


def test_no_record_at_all_is_allowed(int8_copy: Path):
    assert find_records(int8_copy) == []


def test_a_manifest_entrys_own_contract_wins_over_the_runs(int8_copy: Path):
    """An int8 export records its own contract (mean 128, std 128) next to the run's (raw pixels); older runs have only the run's."""
    from edge.pixels.contract import PixelContract
    from edge.pixels.preprocess import normalization

    run_wide, own = PixelContract().as_record(), PixelContract(normalization(128, 128, "int8")).as_record()
    entry = {"path": int8_copy.name, "sha256": sha256_bytes(int8_copy.read_bytes())}
    manifest = {"schema_version": 1, "labels": LABELS, "preprocessing": run_wide, "artifacts": {"model_int8": entry}}
    (int8_copy.parent / "manifest.json").write_text(json.dumps(manifest))
    assert find_records(int8_copy)[0].preprocessing == run_wide
    manifest["artifacts"]["model_int8"]["preprocessing"] = own
    (int8_copy.parent / "manifest.json").write_text(json.dumps(manifest))
    assert find_records(int8_copy)[0].preprocessing == own


def test_a_record_that_contradicts_the_models_metadata_names_both_values(int8_copy: Path):
    from edge.model.integrity import ModelRecord, check_agreement
    from edge.pixels.contract import PixelContract
    from edge.pixels.preprocess import normalization

    inside = ModelRecord("the TFLite metadata of model_int8.tflite (edgeflow_model.json)", "metadata", "", LABELS, 16,
                         PixelContract(normalization(128, 128, "int8")).as_record())
    sidecar = ModelRecord(Path("model_int8.tflite.json"), "sidecar", "0" * 64, LABELS, 16, PixelContract().as_record())
    check_agreement([sidecar._replace(preprocessing=inside.preprocessing)], inside)  # agreeing records pass
    check_agreement([sidecar], None)  # a model without metadata: nothing to contradict
    with pytest.raises(IntegrityError, match=r"sidecar model_int8.tflite.json contradicts the TFLite metadata of "
                                             r"model_int8.tflite .* on preprocessing: mean \[0.0, 0.0, 0.0\] there, "
                                             r"\[128.0, 128.0, 128.0\] in the model; std \[1.0, 1.0, 1.0\] there"):
        check_agreement([sidecar], inside)
    with pytest.raises(IntegrityError, match=r"on labels: \['a', 'b', 'c'\] there, \['red', 'green', 'blue'\] in the model"):
        check_agreement([sidecar._replace(preprocessing=None, labels=["a", "b", "c"])], inside)
