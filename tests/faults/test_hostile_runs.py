"""A run directory from somewhere else (a bucket, a colleague's disk) must not reach outside itself: every path
its journal or manifest names is inside RUN with no symlinked component, or the run is refused naming the path
with nothing touched (issue 39's audit: a journal through `RUN/evil -> /elsewhere` made a plain `pipeline predict`
delete, rmtree and replace files in /elsewhere)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pipeline.errors import ManifestError
from pipeline.rundir import journal
from pipeline.rundir.run import Run
from tests.support.helpers import cli, tree_snapshot

pytestmark = pytest.mark.host


def _elsewhere(tmp_path) -> Path:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "photos").mkdir(parents=True)
    (elsewhere / "photos" / "1.jpg").write_bytes(b"a photo")
    (elsewhere / "important.txt").write_text("precious")
    (elsewhere / "config.txt").write_text("mine")
    return elsewhere


def _run_with_journal(tmp_path, record: dict, manifest: bytes = b'{"schema_version": 1}') -> Path:
    run = tmp_path / "RUN"
    run.mkdir()
    (run / "evil").symlink_to(tmp_path / "elsewhere")
    (run / "manifest.json").write_bytes(manifest)
    (run / "x.old").write_text("from the run")
    (run / ".journal.json").write_text(json.dumps({"version": 1, "manifest_sha256": "0" * 64, "paths": [],
                                                   "removing": [], "made": [], **record}))
    return run


def _entry(path, new="n.tmp", old=None, prepared=True):
    return {"path": path, "new": new, "old": old, "prepared": prepared}


# Each names /elsewhere through RUN/evil in one of the places recovery deletes, renames or writes.
JOURNALS = {
    "path with nothing before it (deleted)": {"paths": [_entry("evil/important.txt")]},
    "folder with nothing before it (rmtree'd)": {"paths": [_entry("evil/photos")]},
    "path restored from a second name (replaced)": {"paths": [_entry("evil/config.txt", old="x.old")]},
    "second name (renamed over the path)": {"paths": [_entry("config.txt", old="evil/config.txt")]},
    "temporary name (deleted)": {"paths": [_entry("a.txt", new="evil/important.txt", prepared=False)]},
    "removed path (put back)": {"removing": [{"path": "evil/config.txt", "old": "x.old"}]},
    "removed path's second name": {"removing": [{"path": "b.txt", "old": "evil/important.txt"}]},
    "made folder (removed)": {"made": ["evil/photos"]},
}


@pytest.mark.parametrize("case", sorted(JOURNALS))
def test_recovery_refuses_a_journal_path_through_a_symlink(case, tmp_path):
    elsewhere = _elsewhere(tmp_path)
    before = tree_snapshot(elsewhere)
    run = _run_with_journal(tmp_path, JOURNALS[case])
    in_run = tree_snapshot(run)
    with pytest.raises(ManifestError, match=r"goes through the symlink .*evil.*nothing was changed"):
        journal.recover(run)
    assert tree_snapshot(elsewhere) == before
    assert tree_snapshot(run) == in_run


def test_a_committed_journal_does_not_clean_up_old_paths_through_a_symlink(tmp_path):
    elsewhere = _elsewhere(tmp_path)
    before = tree_snapshot(elsewhere)
    manifest = b'{"schema_version": 1}'
    run = _run_with_journal(tmp_path, {"manifest_sha256": hashlib.sha256(manifest).hexdigest(),
                                       "paths": [_entry("model.tflite", old="evil/photos")]}, manifest)
    with pytest.raises(ManifestError, match="evil/photos"):
        journal.recover(run)
    assert tree_snapshot(elsewhere) == before


def test_pipeline_predict_refuses_the_audits_crafted_run(tmp_path):
    """The audit's command, as a user runs it: a reader of the run, not a writer."""
    from PIL import Image

    elsewhere = _elsewhere(tmp_path)
    before = tree_snapshot(elsewhere)
    run = _run_with_journal(tmp_path, {"paths": [_entry("evil/important.txt"), _entry("evil/photos"),
                                                 _entry("evil/config.txt", old="x.old")]})
    Image.new("RGB", (8, 8)).save(tmp_path / "img.png")
    result = cli(["predict", str(run), "--data", str(tmp_path / "img.png"), "--out", str(tmp_path / "o.csv")])
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "goes through the symlink" in result.stderr and "evil/important.txt" in result.stderr
    assert tree_snapshot(elsewhere) == before
    assert not (tmp_path / "o.csv").exists()


def test_a_manifest_path_through_a_symlink_is_refused(tmp_path):
    elsewhere = _elsewhere(tmp_path)
    run = tmp_path / "RUN"
    run.mkdir()
    (run / "evil").symlink_to(elsewhere)
    digest = hashlib.sha256(b"precious").hexdigest()
    manifest = {"schema_version": 1, "labels": ["a"], "model": {"image_size": 8},
                "artifacts": {"labels": {"path": "evil/important.txt", "sha256": digest}}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match=r"'labels' is recorded as 'evil/important.txt' goes through the symlink"):
        Run.open(run).artifact("labels")


def test_a_transaction_refuses_a_symlinked_folder_in_the_run_before_writing(tmp_path):
    """`RUN/parity -> /elsewhere`: parity's reports would land outside the run; refused in one line, nothing written."""
    elsewhere = _elsewhere(tmp_path)
    before = tree_snapshot(elsewhere)
    run = tmp_path / "RUN"
    run.mkdir()
    (run / "parity").symlink_to(elsewhere)
    manifest = {"schema_version": 1, "labels": ["a"], "model": {"image_size": 8}, "artifacts": {}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    in_run = tree_snapshot(run)
    opened = Run.open(run)
    with pytest.raises(ManifestError, match=r"'parity/report.json' goes through the symlink .*parity"):
        with opened.transaction() as t:
            t.write("parity_report", b"{}")
            t.write_file(run / "parity" / "report.md", b"# report")
    assert tree_snapshot(elsewhere) == before
    assert tree_snapshot(run) == in_run


def test_parity_bundle_never_deletes_what_appeared_in_its_folder_while_staging(tmp_path):
    """Issue 39: `parity --bundle DIR` moved DIR aside and deleted it, with what appeared in it while staging."""
    from pipeline.errors import PipelineError
    from pipeline.inference.bundle import _move_in

    staging = tmp_path / ".scratch" / "bundle"
    staging.mkdir(parents=True)
    (staging / "bundle.json").write_text("{}")
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    (bundle_dir / "someone-elses.txt").write_text("keep me")
    with pytest.raises(PipelineError, match="filled up while the bundle was written"):
        _move_in(staging, bundle_dir)
    assert (bundle_dir / "someone-elses.txt").read_text() == "keep me"
    (bundle_dir / "someone-elses.txt").unlink()
    _move_in(staging, bundle_dir)  # still empty: the bundle moves in
    assert (bundle_dir / "bundle.json").exists() and not staging.exists()
