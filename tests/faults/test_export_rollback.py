"""A failed export leaves the run byte for byte as it was: models, sidecars, report and manifest change together or not at all."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.helpers import tree_snapshot

pytestmark = pytest.mark.host


def test_failure_while_building_the_sidecar_keeps_the_old_model(exported_copy, monkeypatch):
    from pipeline import export
    from pipeline.tasks.classify import export as classify_export

    before = tree_snapshot(exported_copy)

    def broken(*args, **kwargs):
        raise RuntimeError("injected: sidecar")

    monkeypatch.setattr(classify_export, "sidecar", broken)
    with pytest.raises(RuntimeError, match="injected"):
        export.export_model(export.ExportConfig(mode=export.Mode.FLOAT32), exported_copy)
    assert tree_snapshot(exported_copy) == before  # the old code unlinked model_float.tflite, which the manifest records


def test_failed_rename_of_the_sidecar_restores_the_model(exported_copy, monkeypatch):
    from pipeline import export
    from pipeline.rundir import files

    before = tree_snapshot(exported_copy)
    real = os.replace

    def flaky(src, dst):
        if Path(dst).name == "model_float.tflite.json":
            raise OSError(28, "injected: no space left on device")
        return real(src, dst)

    monkeypatch.setattr(files.os, "replace", flaky)
    with pytest.raises(OSError, match="injected"):
        export.export_model(export.ExportConfig(mode=export.Mode.FLOAT32), exported_copy)
    assert tree_snapshot(exported_copy) == before


def test_failure_saving_the_manifest_puts_the_old_int8_files_back(exported_copy, monkeypatch):
    from pipeline import export

    before = tree_snapshot(exported_copy)
    real = os.replace

    def broken(src, dst):  # the manifest's rename, the transaction's commit point
        if Path(dst).name == "manifest.json":
            raise OSError(5, "injected: manifest write failed")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", broken)
    # Per-tensor gives different bytes from the recorded per-channel model, so a leftover would show.
    with pytest.raises(OSError, match="injected"):
        export.export_model(export.ExportConfig(mode=export.Mode.INT8, per_tensor=True, calibration_samples=20), exported_copy)
    assert tree_snapshot(exported_copy) == before
