"""training/workers.py: what the chief and a non-chief worker write, lock and leave behind in RUN (on a local folder; the
two-process runs are in test_train.py and test_train_peer_loss.py)."""
from __future__ import annotations

import json

import pytest

from pipeline.rundir import lock
from pipeline.training.strategy import StrategyChoice
from pipeline.training.workers import Workers

BACKUPS = ("backup", "backup_frozen")


def _workers(run_dir, chief: bool, created: bool = True) -> Workers:
    # The strategy object is never used by Workers: what it decides from is is_chief and kind.
    chosen = StrategyChoice(strategy=None, kind="multi_worker_mirrored", replicas=2, description="2 workers", is_chief=chief, is_tpu=False)
    return Workers(chosen, run_dir, created=created)


def test_only_the_chief_takes_the_lock_and_writes(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    worker = _workers(run, chief=False)
    with worker.lock("pipeline train"):
        worker.make_folder(run / ".train_state")
        worker.write_json(run / "config.json", {"a": 1})
    assert list(run.iterdir()) == []
    chief = _workers(run, chief=True)
    with chief.lock("pipeline train"):
        assert (run / lock.LOCK_NAME).exists()
        chief.make_folder(run / ".train_state")
        chief.write_json(run / ".train_state" / "config.json", {"a": 1})
    assert json.loads((run / ".train_state" / "config.json").read_text()) == {"a": 1}


def test_a_non_chief_that_fails_removes_only_what_it_left_empty(tmp_path):
    run = tmp_path / "run"
    state = run / ".train_state"
    (state / "backup").mkdir(parents=True)  # BackupAndRestore's empty folder
    (state / "backup_frozen").mkdir()
    (state / "history.json").write_text("[]")  # the chief's, on shared storage
    with pytest.raises(KeyboardInterrupt):
        with _workers(run, chief=False).kept_on_failure(state, run / "logs", state / "history.json", BACKUPS):
            raise KeyboardInterrupt
    assert sorted(p.name for p in state.iterdir()) == ["history.json"]


def test_a_non_chief_that_made_run_removes_it_when_empty(tmp_path):
    run = tmp_path / "run"
    (run / ".train_state" / "backup").mkdir(parents=True)
    with pytest.raises(RuntimeError):
        with _workers(run, chief=False).kept_on_failure(run / ".train_state", run / "logs", run / ".train_state" / "h", BACKUPS):
            raise RuntimeError("lost")
    assert not run.exists()


@pytest.mark.parametrize("progress, kept", [(False, []), (True, [".train_state", "logs"])])
def test_a_chief_that_fails_keeps_its_state_only_after_an_epoch(tmp_path, progress, kept):
    run = tmp_path / "run"
    chief = _workers(run, chief=True, created=True)
    run.mkdir()
    with pytest.raises(RuntimeError):
        with chief.lock("pipeline train"), chief.kept_on_failure(run / ".train_state", run / "logs",
                                                                  run / ".train_state" / "history.json", BACKUPS):
            chief.make_folder(run / ".train_state")
            (run / "logs").mkdir()
            if progress:
                (run / ".train_state" / "history.json").write_text("[{}]")
            raise RuntimeError("failed")
    assert (run / lock.LOCK_NAME).exists()  # never removed
    assert sorted(p.name for p in run.iterdir() if p.name not in (lock.LOCK_NAME, lock.HOLDER_NAME)) == kept


def test_a_chief_leaves_a_folder_it_did_not_make_as_it_was(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    chief = _workers(run, chief=True, created=False)
    with pytest.raises(RuntimeError):
        with chief.kept_on_failure(run / ".train_state", run / "logs", run / ".train_state" / "history.json", BACKUPS):
            chief.make_folder(run / ".train_state")
            raise RuntimeError("failed")
    assert [p.name for p in run.iterdir()] == ["notes.txt"]


def test_a_non_chief_saves_into_a_folder_it_removes(tmp_path, capsys):
    run = tmp_path / "run"
    (run / ".train_state" / "backup").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")  # the chief's
    saved = []

    def save(folder):
        (folder / "model").write_text("weights")
        saved.append(folder)

    _workers(run, chief=False).finish_elsewhere(save, run / ".train_state", BACKUPS)
    assert saved and not saved[0].exists() and not str(saved[0]).startswith(str(run))
    assert [p.name for p in run.iterdir()] == ["manifest.json"]
    assert "the chief writes the run directory" in capsys.readouterr().out
