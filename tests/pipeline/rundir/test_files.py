"""pipeline.rundir.files and journal: directories and groups of files replaced so that a failure at any point leaves
the old state (kills and power cuts: tests/faults/test_crash_safety.py)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pipeline.rundir import files, journal
from pipeline.rundir.files import staged_path
from tests.support.signal_moments import signal_when_made
from tests.support.helpers import tree_snapshot


snapshot = tree_snapshot


def _fail_on_call(monkeypatch, module, n: int):
    """Make the n-th os.replace made through `module` fail."""
    real, count = os.replace, {"n": 0}

    def flaky(src, dst):
        count["n"] += 1
        if count["n"] == n:
            raise OSError(5, f"injected failure of rename {n}")
        return real(src, dst)

    monkeypatch.setattr(module.os, "replace", flaky)


def _fail_moving_in(monkeypatch, staged_name: str):
    """Make the first rename of the staged `staged_name` (inside its .tmp folder) onto its final place fail."""
    real, failed = os.replace, []

    def flaky(src, dst):
        src = Path(src)
        if not failed and src.name == staged_name and src.parent.name.endswith(".tmp"):
            failed.append(src)
            raise OSError(5, "injected failure of the rename into place")
        return real(src, dst)

    monkeypatch.setattr(files.os, "replace", flaky)


@pytest.fixture
def run(tmp_path) -> Path:
    run = tmp_path / "run"
    (run / "saved_model" / "variables").mkdir(parents=True)
    (run / "saved_model" / "saved_model.pb").write_bytes(b"old graph")
    (run / "saved_model" / "variables" / "v.data").write_bytes(b"old weights")
    (run / "model.tflite").write_bytes(b"old model")
    (run / "model.tflite.json").write_text('{"old": true}')
    return run


def test_staged_directory_replaces_the_old_one(run):
    with staged_path(run / "saved_model") as new:
        new.mkdir()
        (new / "saved_model.pb").write_bytes(b"new graph")
    assert snapshot(run / "saved_model") == {"saved_model.pb": b"new graph"}
    assert sorted(p.name for p in run.iterdir()) == ["model.tflite", "model.tflite.json", "saved_model"]


def test_failed_rename_of_a_staged_directory_keeps_the_old_one(run, monkeypatch):
    before = snapshot(run)
    _fail_moving_in(monkeypatch, "saved_model")
    with pytest.raises(OSError, match="injected"):
        with staged_path(run / "saved_model") as new:
            new.mkdir()
            (new / "saved_model.pb").write_bytes(b"new graph")
    assert snapshot(run) == before  # the old directory used to be deleted before the rename


def test_failure_while_filling_keeps_the_old_directory(run):
    before = snapshot(run)
    with pytest.raises(RuntimeError):
        with staged_path(run / "saved_model") as new:
            new.mkdir()
            raise RuntimeError("save failed")
    assert snapshot(run) == before


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_as_the_staging_folder_is_made_leaves_nothing(run, monkeypatch, signum):
    before = snapshot(run)
    with signal_when_made(monkeypatch, "mkdtemp", signum) as stopped_by:
        with pytest.raises(stopped_by):
            with staged_path(run / "saved_model") as new:
                new.mkdir()
    assert snapshot(run) == before and not [p for p in run.iterdir() if p.name.startswith(".")]


def _apply(run, contents):
    journal.apply(run, contents, (), b'{"new": "manifest"}\n')


def test_a_transaction_puts_every_file_in_place(run):
    _apply(run, {run / "model.tflite": b"new model", run / "report.json": b"{}"})
    assert snapshot(run)["model.tflite"] == b"new model" and snapshot(run)["report.json"] == b"{}"
    assert snapshot(run)["manifest.json"] == b'{"new": "manifest"}\n'
    assert not [p for p in run.iterdir() if p.name.startswith(".")]


# Renames, in order: the journal's, model.tflite, model.tflite.json, report.json, the manifest's (the commit).
@pytest.mark.parametrize("fail_at", [1, 2, 3, 4, 5])
def test_a_failed_rename_restores_every_file(run, monkeypatch, fail_at):
    before = snapshot(run)
    _fail_on_call(monkeypatch, files, fail_at)
    with pytest.raises(OSError, match="injected"):
        _apply(run, {run / "model.tflite": b"new", run / "model.tflite.json": b"{}", run / "report.json": b"{}"})
    assert snapshot(run) == before


def test_a_failed_rename_restores_a_replaced_folder(run, monkeypatch):
    before = snapshot(run)
    prepared = run / ".save-x.tmp" / "saved_model"
    (prepared / "variables").mkdir(parents=True)
    (prepared / "saved_model.pb").write_bytes(b"new graph")
    _fail_on_call(monkeypatch, files, 4)  # model.tflite's rename, after the folder moved in (journal 1, aside 2, in 3)
    with pytest.raises(OSError, match="injected"):
        _apply(run, {run / "saved_model": prepared, run / "model.tflite": b"new"})
    after = snapshot(run)
    assert {k: v for k, v in after.items() if not k.startswith(".save-x.tmp")} == before
