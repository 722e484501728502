"""The documents that cross between host and device: each written and read back by its own module, and a file of
another version refused by the one check, naming the file, its version and what this edgeflow reads."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge.documents import bundle, latency, predictions
from edge.model import sidecar
from edge.pixels.contract import PixelContract
from edge.documents.schema import check_version, load
from edge.errors import InputError, IntegrityError
from edge.model.integrity import find_records, verify
from edge.pixels.preprocess import normalization
from tests.support.edge_paths import IMAGES, LABELS, run_edge

# What an int8 export records: Coral's convention, mean 128 and std 128 (edge.pixels.contract's record).
INT8_CONTRACT = PixelContract(normalization(128, 128, "Coral's convention")).as_record()


@pytest.mark.parametrize("version, says", [
    (3, "has schema_version 3, expected 2 (what this edgeflow reads): it was written by a newer edgeflow"),
    (1, "has schema_version 1, expected 2 (what this edgeflow reads): it was made by an older edgeflow: do this"),
    ("2", "has schema_version '2', expected 2 (what this edgeflow reads); expected the thing"),
    (True, "has schema_version True, expected 2"),
    (None, "has schema_version None, expected 2"),
])
def test_one_check_names_the_file_its_version_and_what_is_read(tmp_path: Path, version, says):
    path = tmp_path / "doc.json"
    path.write_text(json.dumps({"schema_version": version}))
    with pytest.raises(InputError) as caught:
        load(path, "document", 2, InputError, "the thing", older="do this")
    assert str(caught.value).startswith(f"document {path} {says}")
    assert check_version({"schema_version": 2, "x": 1}, path, "document", 2, InputError, "the thing") == {"schema_version": 2, "x": 1}


def test_an_older_version_without_advice_is_refused_as_unknown(tmp_path: Path):
    with pytest.raises(IntegrityError, match=r"schema_version 1, expected 2 \(what this edgeflow reads\); expected the thing$"):
        check_version({"schema_version": 1}, tmp_path / "x.json", "sidecar", 2, IntegrityError, "the thing")


def test_unreadable_and_non_object_files_say_what_was_expected(tmp_path: Path):
    path = tmp_path / "doc.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="cannot read latency file .*; expected the JSON written by `edge bench"):
        latency.read_latency(path)
    path.write_text("[1, 2]")
    with pytest.raises(InputError, match="holds a JSON list; expected the JSON written by `edge evaluate`"):
        predictions.read_predictions(path)


def _write_bundle(tmp_path: Path, model: Path) -> Path:
    sidecar.write_sidecar(model, labels=LABELS, preprocessing=INT8_CONTRACT)
    entry = {"path": model.name, "sha256": sidecar.sha256_bytes(model.read_bytes()), "preprocessing": INT8_CONTRACT}
    examples = [(f"{name}.png", i, (IMAGES / f"{name}.png").read_bytes()) for i, name in enumerate(LABELS)]
    examples.append(("array", 0, np.zeros((4, 4, 3), np.uint8)))  # an array data set's image: bundled as PNG
    return bundle.write_bundle(tmp_path / "bundle", LABELS, PixelContract.from_record(INT8_CONTRACT, "test"), examples, {"model_int8": bundle.ShippedModel(model, entry)})


def test_a_bundle_reads_back_what_was_written_and_vouches_for_its_model(int8_copy: Path, tmp_path: Path):
    folder = _write_bundle(tmp_path, int8_copy)
    read = bundle.read_bundle(folder)
    assert read.labels == LABELS
    assert [(i.file, i.id, i.label) for i in read.images] == [
        ("heldout/00000.png", "red.png", 0), ("heldout/00001.png", "green.png", 1), ("heldout/00002.png", "blue.png", 2),
        ("heldout/00003.png", "array", 0)]
    assert read.images[0].sha256 == sidecar.sha256_bytes((IMAGES / "red.png").read_bytes())
    # The bundle's manifest names the contract its models take, and vouches for the bundled model.
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["preprocessing"] == INT8_CONTRACT == manifest["artifacts"]["model_int8"]["preprocessing"]
    shipped = folder / int8_copy.name
    records = find_records(shipped)
    assert [r.kind for r in records] == ["sidecar", "manifest"]
    assert verify(shipped, shipped.read_bytes(), records) == sidecar.sha256_bytes(int8_copy.read_bytes())


def test_a_bundle_of_the_first_version_is_refused_with_what_to_run(int8_copy: Path, tmp_path: Path):
    """Version 1 bundles said mean 0, std 1 at the top of their manifest, next to models that take 128 and 128."""
    folder = _write_bundle(tmp_path, int8_copy)
    document = json.loads((folder / "bundle.json").read_text())
    (folder / "bundle.json").write_text(json.dumps(dict(document, schema_version=1)))
    with pytest.raises(InputError) as caught:
        bundle.read_bundle(folder)
    assert str(caught.value) == (f"evaluation bundle {folder / 'bundle.json'} has schema_version 1, expected 2 (what this "
                                 "edgeflow reads): it was made by an older edgeflow: run `pipeline parity RUN --bundle DIR` again")
    result = run_edge("evaluate", folder / int8_copy.name, "--data", folder, "--out", tmp_path / "p.json")
    assert result.exit_code == 1 and "made by an older edgeflow" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "p.json").exists()


def test_a_bundle_file_changed_after_writing_is_refused(int8_copy: Path, tmp_path: Path):
    folder = _write_bundle(tmp_path, int8_copy)
    (folder / "heldout" / "00001.png").write_bytes((IMAGES / "red.png").read_bytes())
    with pytest.raises(InputError, match="the bundle changed after `pipeline parity --bundle` wrote it"):
        bundle.read_bundle(folder)


def test_predictions_read_back_as_written(tmp_path: Path):
    entries = [predictions.prediction("heldout/00000.png", "a", 1, "f" * 64, np.array([0.25, 0.75], np.float32))]
    document = predictions.predictions_document("m.tflite", "0" * 64, "ai_edge_litert", False, ["x", "y"], entries,
                                                1.0, 1, 1.0, None, [])
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(document))
    read = predictions.read_predictions(path)
    assert (read.model_sha256, read.backend, read.edgetpu) == ("0" * 64, "ai_edge_litert", False)
    assert read.predictions == [predictions.Prediction("heldout/00000.png", "a", 1, "f" * 64, [0.25, 0.75])]
    path.write_text(json.dumps(dict(document, predictions=[dict(entries[0], scores="0.25")])))
    with pytest.raises(InputError, match=r"device result 0 \(a\) in .* has scores '0.25', expected a list of numbers"):
        predictions.read_predictions(path)
    path.write_text(json.dumps(dict(document, schema_version=2)))
    with pytest.raises(InputError, match="has schema_version 2, expected 1 .*newer edgeflow"):
        predictions.read_predictions(path)


def test_latency_reads_back_as_written_and_names_a_missing_field(tmp_path: Path):
    document = latency.latency_document("m.tflite", "0" * 64, "ai_edge_litert", False, None, 10, 5.0, 1.0, 1.5, 0, None)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(document))
    assert latency.read_latency(path) == document
    path.write_text(json.dumps({k: v for k, v in document.items() if k != "median_ms"}))
    with pytest.raises(InputError, match="'median_ms' is None; expected float"):
        latency.read_latency(path)


def test_a_sidecar_reads_back_as_written(int8_copy: Path):
    written = sidecar.write_sidecar(int8_copy, labels=LABELS, image_size=8, preprocessing=INT8_CONTRACT)
    read = sidecar.read_sidecar(int8_copy)
    assert read == sidecar.Sidecar(written, sidecar.sha256_bytes(int8_copy.read_bytes()), LABELS, 8, INT8_CONTRACT)
