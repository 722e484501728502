"""The typed views of a run's manifest: what stages read, a missing fact named, and records that round-trip.

Stages read the manifest only through `Run` (pipeline/rundir/): a fact a stage needs and the run lacks is a
ManifestError naming the field; a fact only shown is None; a pixel contract read from the manifest and
written again gives the same record, so models exported from it carry the same bytes.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge.pixels.contract import PixelContract
from pipeline.errors import ManifestError
from pipeline.rundir import manifest as manifest_io
from pipeline.rundir.run import ARTIFACTS, Run, artifact


def _run(tmp_path: Path, **sections) -> Run:
    record = {"labels": ["a", "b"], "model": {"name": "small_cnn", "image_size": 16}, **sections}
    return Run(tmp_path, manifest_io.new(**record))


def test_the_views_read_what_train_records(tmp_path):
    run = _run(tmp_path, data={"train": {"spec": "digits", "kind": "digits"}, "val": None,
                               "split": {"heldout_fraction": 0.2, "seed": 7, "method": "seeded hash"},
                               "identity": {"classes": ["a", "b"], "train": {"count": 3, "sha256": "ab"},
                                            "heldout": {"count": 1, "examples": [["x", 0, "d"]]}}},
               training={"epochs": 4, "global_batch": 32, "seed": 7, "config": {"frozen_epochs": 0}},
               stages={"train": {"finished": "2026-11-24T09:00:00+00:00"}})
    assert (run.data.train_spec, run.data.val_spec, run.data.heldout_fraction, run.data.seed) == ("digits", None, 0.2, 7)
    assert run.data.classes == ["a", "b"] and run.data.summary("heldout") == {"count": 1}  # no example list
    assert (run.training.epochs, run.training.global_batch, run.training.config) == (4, 32, {"frozen_epochs": 0})
    assert run.training.provenance() == {"epochs": 4, "seed": 7}  # only what was recorded
    assert (run.model.name, run.image_size, run.trained_at) == ("small_cnn", 16, "2026-11-24T09:00:00+00:00")


@pytest.mark.parametrize("read, named", [
    (lambda run: run.data.train_spec, "data.train.spec"),
    (lambda run: run.data.seed, "data.split.seed"),
    (lambda run: run.training.epochs, "training.epochs"),
    (lambda run: run.training.global_batch, "training.global_batch"),
])
def test_a_fact_a_stage_needs_is_refused_naming_the_field(tmp_path, read, named):
    with pytest.raises(ManifestError, match=named.replace(".", r"\.")):
        read(_run(tmp_path))


def test_a_fact_only_shown_is_none_for_an_older_run(tmp_path):
    run = _run(tmp_path)
    assert (run.data.identity, run.data.classes, run.data.summary("train"), run.data.split) == (None, None, {}, {})
    assert (run.model.starting_weights, run.training.get("replicas"), run.remedy, run.parity) == (None, None, None, {})


def test_every_file_of_a_run_has_its_name_in_the_table(tmp_path):
    run = _run(tmp_path)
    assert run.path("report") == tmp_path / "report.html" and run.path("manifest") == tmp_path / manifest_io.MANIFEST_NAME
    assert {artifact(k).schema for k in ("quantization_report", "edgetpu_report", "parity_report")} == {1}
    assert len({a.name for a in ARTIFACTS.values()}) == len(ARTIFACTS)  # no two keys share a file


def test_a_contract_this_edgeflow_cannot_honour_is_a_manifest_error(tmp_path):
    run = _run(tmp_path, preprocessing={**PixelContract().as_record(), "version": 9})
    with pytest.raises(ManifestError, match="version 9"):
        run.contract


def test_the_contracts_of_a_real_run_write_back_as_recorded(exported_run):
    # What export and compile write is `as_record()` of what they read: it must be the recorded JSON, key for key.
    run = Run.open(exported_run)
    recorded = json.loads((exported_run / manifest_io.MANIFEST_NAME).read_text())
    assert run.contract.as_record() == recorded["preprocessing"]
    entries = {k: e for k, e in recorded["artifacts"].items() if "preprocessing" in e}
    assert {"model_float", "model_int8"} <= set(entries)
    for key, entry in entries.items():
        assert json.dumps(run.contract_of(key).as_record()) == json.dumps(entry["preprocessing"]), key
    assert run.contract_of("model_int8").norm.mean == (128.0, 128.0, 128.0)
