"""A SIGKILL at every step of a transaction leaves the old run or the new one, and the next process that opens the
run finishes or rolls it back and removes every leftover (pipeline/rundir/journal.py).

Each case runs the transaction once to completion to count its steps N and record the new run, then, for every
k in 1..N, in a fresh copy of the old run, runs it in a child process whose `journal.step` hook (the one seam the
product offers) sends SIGKILL to itself at step k. This process then opens the run as a reader, and as a writer.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.errors import RunBusy
from pipeline.rundir import journal, lock
from pipeline.rundir.files import scratch_folder
from pipeline.rundir.run import Run, writing
from tests.support.helpers import REPO, cli, quiet_env

pytestmark = pytest.mark.slow

LEFTOVER = re.compile(r"^\..+\.(tmp|old)$")
LOCK_FILES = {".lock", ".lock.holder.json"}  # the lock's file stays; a killed holder's note is rewritten by the next

# The child: open RUN for writing, run scenario SCENARIO, with SIGKILL at step K (0: never). Prints the steps' names.
CHILD = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    from pipeline.rundir import journal
    from pipeline.rundir.files import scratch_folder
    from pipeline.rundir.run import writing
    from tests.faults.test_crash_safety import SCENARIOS

    run_dir, scenario, kill_at = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    steps = []

    def step(name):
        steps.append(name)
        if len(steps) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    with writing(run_dir, "crash test") as run:
        journal.step = step  # after the lock's own recovery: only the transaction's steps count
        SCENARIOS[scenario](run)
    print(json.dumps(steps))
""")


def _old_run(run_dir: Path) -> None:
    """A run as train leaves it (a SavedModel-like tree, a model with its sidecar, labels), written the product's way."""
    run = Run.new(run_dir, labels=["cat", "dog"], model={"name": "small_cnn", "image_size": 16},
                  data={"train": {"spec": "digits"}}, training={"epochs": 1})
    run_dir.mkdir(parents=True)
    with scratch_folder(run_dir, prefix=".save-") as scratch:
        _saved_model(scratch / "saved_model", b"old")
        with run.transaction() as t:
            t.write("saved_model", scratch / "saved_model")
            t.write("model_float", b"old float model")
            t.write_file(run_dir / "model_float.tflite.json", b'{"old": true}')
            t.write("labels", b"cat\ndog\n")


def _saved_model(folder: Path, tag: bytes) -> None:
    (folder / "variables").mkdir(parents=True)
    (folder / "assets").mkdir()
    (folder / "saved_model.pb").write_bytes(b"graph " + tag)
    (folder / "variables" / "variables.index").write_bytes(b"index " + tag)
    (folder / "variables" / "variables.data-00000-of-00001").write_bytes(b"weights " + tag * 1000)


def _replace(run):
    with run.transaction() as t:
        t.write("model_float", b"new float model")
        t.write_file(run.dir / "model_float.tflite.json", b'{"new": true}')
        t.write("labels", b"cat\ndog\nbird\n")
        t.set("labels", ["cat", "dog", "bird"])


def _add(run):
    with run.transaction() as t:
        t.write("model_int8", b"int8 model")
        t.write_file(run.dir / "model_int8.tflite.json", b'{"int8": true}')
        t.write("parity_report", b'{"gate": "pass"}')  # in a folder that does not exist yet


def _forget(run):
    with run.transaction() as t:
        t.forget("model_float")  # its file and sidecar go


def _prepared(run):
    with scratch_folder(run.dir, prefix=".save-") as scratch:
        _saved_model(scratch / "saved_model", b"new")
        (scratch / "keras_model.keras").write_bytes(b"keras file")
        with run.transaction() as t:
            t.write("saved_model", scratch / "saved_model")
            t.write("keras_model", scratch / "keras_model.keras")


SCENARIOS = {"replace": _replace, "add": _add, "forget": _forget, "prepared": _prepared}


def _state(run_dir: Path) -> dict:
    """Every file and folder under RUN with its bytes (the manifest without its time stamp), lock files aside."""
    state = {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        if rel in LOCK_FILES:
            continue
        if rel == "manifest.json":
            manifest = json.loads(path.read_text())
            manifest.pop("updated")
            state[rel] = manifest
        else:
            state[rel] = path.read_bytes() if path.is_file() else None
    return state


def _leftovers(run_dir: Path) -> list:
    return [p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")
            if LEFTOVER.match(p.name) or p.name == journal.JOURNAL_NAME]


def _child(run_dir: Path, scenario: str, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(run_dir), scenario, str(kill_at)], capture_output=True,
                          text=True, timeout=60, cwd=REPO, env=quiet_env())


@pytest.fixture(scope="module")
def old_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("old") / "run"
    _old_run(run_dir)
    return run_dir


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_kill_at_every_step_leaves_the_old_run_or_the_new_one(old_run, tmp_path, scenario):
    old = _state(old_run)
    finished = tmp_path / "finished"
    shutil.copytree(old_run, finished)
    done = _child(finished, scenario, 0)
    assert done.returncode == 0, done.stderr
    steps, new = json.loads(done.stdout.splitlines()[-1]), _state(finished)
    assert new != old and "journal written" in steps and "committed" in steps
    outcomes = set()
    for k in range(1, len(steps) + 1):
        run_dir = tmp_path / f"killed-{k}"
        shutil.copytree(old_run, run_dir)
        killed = _child(run_dir, scenario, k)
        assert killed.returncode == -signal.SIGKILL, f"step {k}: {killed.stderr}"
        # A reader: sees a committed run (it recovers a pending journal first), every artifact with its sha256.
        run = Run.open(run_dir)
        for key in run.manifest["artifacts"]:
            assert run.artifact(key).exists()  # checks the sha256 too
        manifest = dict(run.manifest)
        manifest.pop("updated")
        assert manifest in (old["manifest.json"], new["manifest.json"]), f"step {k}"
        # A writer: takes the lock, which removes whatever the killed process left.
        with writing(run_dir, "after the kill"):
            pass
        state = _state(run_dir)
        assert state in (old, new), f"killed at step {k}: neither the old run nor the new one"
        assert not _leftovers(run_dir), f"step {k}"
        outcomes.add("new" if state == new else "old")
    assert outcomes == {"old", "new"}  # the kills fell on both sides of the commit


def test_a_kill_while_recovering_is_recovered_again(old_run, tmp_path):
    """Recovery is steps too: a second kill inside it leaves a journal that the next opener finishes."""
    finished = tmp_path / "finished"
    shutil.copytree(old_run, finished)
    steps = json.loads(_child(finished, "replace", 0).stdout.splitlines()[-1])
    run_dir = tmp_path / "run"
    shutil.copytree(old_run, run_dir)
    # Killed just after the commit: the new manifest, the old contents' second names and the journal are there.
    assert _child(run_dir, "replace", steps.index("committed") + 1).returncode == -signal.SIGKILL
    assert (run_dir / journal.JOURNAL_NAME).exists() and [p for p in run_dir.iterdir() if p.name.endswith(".old")]
    recovering = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, signal, sys
        from pipeline.rundir import journal
        from pipeline.rundir.run import Run
        journal.step = lambda name: os.kill(os.getpid(), signal.SIGKILL)
        Run.open(sys.argv[1])
    """), str(run_dir)], capture_output=True, text=True, timeout=60, cwd=REPO, env=quiet_env())
    assert recovering.returncode == -signal.SIGKILL and (run_dir / journal.JOURNAL_NAME).exists()
    with writing(run_dir, "after two kills"):
        pass
    assert _state(run_dir) == _state(finished) and not _leftovers(run_dir)


def test_a_reader_that_may_not_write_is_refused_rather_than_shown_a_half_run(old_run, tmp_path):
    """A journal left by a killed writer, on a read-only mount: the reader cannot recover, and says so."""
    run_dir = tmp_path / "run"
    shutil.copytree(old_run, run_dir)
    finished = tmp_path / "finished"
    shutil.copytree(old_run, finished)
    steps = json.loads(_child(finished, "replace", 0).stdout.splitlines()[-1])
    assert _child(run_dir, "replace", steps.index("renames durable") + 1).returncode == -signal.SIGKILL
    mount = tmp_path / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "--bind", str(run_dir), str(mount)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (not root), and root ignores the permissions a read-only folder would have")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], check=True)
        before = _state(mount)
        result = cli(["report", str(mount)])
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert "left unfinished" in result.stderr and "Read-only file system" in result.stderr, result.stderr[-2000:]
        assert _state(mount) == before
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
    Run.open(run_dir)  # with write access, the same reader recovers it
    assert _state(run_dir) == _state(old_run)


# --- durability: what is renamed in is on disk before the manifest commits -----------------------


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="maps file descriptors to paths through /proc (Linux)")
def test_everything_renamed_in_is_fsynced_before_the_manifest_is_renamed(old_run, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    shutil.copytree(old_run, run_dir)
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst, **kwargs):
        events.append(("rename", os.path.abspath(src), os.path.abspath(dst)))
        return real_replace(src, dst, **kwargs)

    run = Run.open(run_dir)
    with scratch_folder(run_dir, prefix=".save-") as scratch:
        _saved_model(scratch / "saved_model", b"new")
        tree = [str(p) for p in [scratch / "saved_model", *(scratch / "saved_model").rglob("*")]]
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        with run.transaction() as t:
            t.write("saved_model", scratch / "saved_model")
            t.write("model_float", b"new float model")
            t.write("parity_report", b"{}")
        monkeypatch.undo()
    commit = next(i for i, e in enumerate(events) if e[0] == "rename" and e[2] == str(run_dir / "manifest.json"))
    before = events[:commit]
    synced = {e[1] for e in before if e[0] == "fsync"}
    assert set(tree) <= synced, f"not fsynced before the commit: {sorted(set(tree) - synced)}"
    moved_in = [e for e in before if e[0] == "rename" and Path(e[2]).name in ("saved_model", "model_float.tflite", "report.json")]
    assert len(moved_in) == 3
    for _, src, dst in moved_in:
        if not Path(dst).name == "saved_model":
            assert src in synced, f"{src} (to be {dst}) was not fsynced before the commit"
        last_rename = max(i for i, e in enumerate(before) if e[0] == "rename" and e[2] == dst)
        assert ("fsync", str(Path(dst).parent)) in before[last_rename:], f"{Path(dst).parent} not fsynced after {dst} moved in"
    journal_written = next(i for i, e in enumerate(events) if e[0] == "rename" and e[2] == str(run_dir / journal.JOURNAL_NAME))
    first_move = min(events.index(e) for e in moved_in)
    assert journal_written < first_move and ("fsync", str(run_dir)) in events[journal_written:first_move]
    assert ("fsync", str(run_dir)) in events[commit:], "the folder was not fsynced after the manifest's rename"


# --- train: its checkpoints stay until the run is written ---------------------------------------

TRAIN_CHILD = textwrap.dedent("""
    import os, signal, sys
    from pipeline.rundir import journal

    def step(name):
        if name == sys.argv[1]:
            os.kill(os.getpid(), signal.SIGKILL)

    journal.step = step
    from pipeline.cli import main
    main(sys.argv[2:])
""")


@pytest.mark.parametrize("moment", ["journal written", "committed"])
def test_train_keeps_its_checkpoints_until_the_run_is_written(tmp_path, moment):
    run_dir = tmp_path / "run"
    args = ["train", "--data", "digits", "--out", str(run_dir), "--epochs", "1", "--image-size", "16", "--no-tensorboard"]
    killed = subprocess.run([sys.executable, "-c", TRAIN_CHILD, moment, *args], capture_output=True, text=True,
                            timeout=600, cwd=REPO, env=quiet_env())
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    if moment == "journal written":  # before the commit: no run, the checkpoints to write it from
        with lock.hold(run_dir, "after the kill"):  # what train does first when started again
            pass
        assert not (run_dir / "manifest.json").exists() and (run_dir / ".train_state" / "history.json").is_file()
        again = cli(args)
        assert again.returncode == 0, again.stderr[-2000:]
        assert "resuming from epoch 1 of 1" in again.stdout and "epoch 1/1" not in again.stdout  # written, not retrained
    else:  # after the commit: the run, and its checkpoints go with the journal
        run = Run.open(run_dir)
        assert all(run.artifact(key).exists() for key in ("saved_model", "keras_model", "labels", "history"))
    assert not (run_dir / ".train_state").exists() and not _leftovers(run_dir)
    assert Run.open(run_dir).has("saved_model")


# --- the lock: its file is never removed, so two writers into one new folder exclude each other -----

LOCK_CHILD = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from pipeline.errors import RunBusy
    from pipeline.rundir import lock

    run_dir, rounds = Path(sys.argv[1]), int(sys.argv[2])
    held, inodes, overlaps = 0, set(), 0
    while held < rounds:
        try:
            with lock.hold(run_dir, "writer %d" % os.getpid()):
                try:  # only one holder at a time can create the marker
                    os.close(os.open(run_dir / "inside", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    overlaps += 1
                    continue
                inodes.add(os.stat(run_dir / lock.LOCK_NAME).st_ino)
                time.sleep(0.002)
                os.unlink(run_dir / "inside")
                held += 1
        except RunBusy:
            time.sleep(0.001)
    print(json.dumps({"overlaps": overlaps, "inodes": sorted(inodes)}))
""")


def test_two_writers_into_one_new_folder_exclude_each_other(tmp_path):
    run_dir = tmp_path / "new"  # no folder, no manifest: the case where the lock file used to be unlinked
    writers = [subprocess.Popen([sys.executable, "-c", LOCK_CHILD, str(run_dir), "60"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO, env=quiet_env()) for _ in range(3)]
    results = []
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        results.append(json.loads(out))
    assert [r["overlaps"] for r in results] == [0, 0, 0], "two writers held the lock at once"
    assert len({i for r in results for i in r["inodes"]}) == 1  # every holder locked the same file
    assert (run_dir / lock.LOCK_NAME).is_file() and not (run_dir / "manifest.json").exists()


def test_a_held_lock_refuses_a_second_writer_and_its_file_stays(tmp_path):
    run_dir = tmp_path / "new"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys
        from pipeline.rundir import lock
        with lock.hold(sys.argv[1], "the first writer"):
            print("held", flush=True)
            sys.stdin.readline()
    """), str(run_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO, env=quiet_env())
    assert holder.stdout.readline().strip() == "held"
    inode = (run_dir / lock.LOCK_NAME).stat().st_ino
    with pytest.raises(RunBusy, match="the first writer"):
        with lock.hold(run_dir, "the second writer"):
            pass
    holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    assert (run_dir / lock.LOCK_NAME).stat().st_ino == inode  # released, not removed
    with lock.hold(run_dir, "the second writer, later"):
        assert (run_dir / lock.LOCK_NAME).stat().st_ino == inode


# --- train: history.json never lacks an epoch its checkpoint has ----------------------------------

CHECKPOINT_CHILD = textwrap.dedent("""
    import os, signal, sys
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tf_keras as keras

    when = sys.argv[1]
    real = keras.callbacks.BackupAndRestore._backup

    def backup(self, epoch, batch=0):  # a SIGKILL just before or just after epoch 2's checkpoint is saved
        if when == "before" and epoch == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        real(self, epoch, batch)
        if when == "after" and epoch == 1:
            os.kill(os.getpid(), signal.SIGKILL)

    keras.callbacks.BackupAndRestore._backup = backup
    from pipeline.cli import main
    main(sys.argv[2:])
""")


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_kill_beside_an_epochs_checkpoint_resumes_with_every_epoch_in_history(tmp_path, when):
    run_dir = tmp_path / "run"
    args = ["train", "--data", "digits", "--out", str(run_dir), "--epochs", "2", "--image-size", "16", "--no-tensorboard"]
    killed = subprocess.run([sys.executable, "-c", CHECKPOINT_CHILD, when, *args], capture_output=True, text=True,
                            timeout=600, cwd=REPO, env=quiet_env())
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    written = json.loads((run_dir / ".train_state" / "history.json").read_text())
    assert [e["epoch"] for e in written] == [1, 2]  # written before the checkpoint, whichever side the kill fell
    assert "epoch 2/2" not in killed.stdout  # the line comes after the checkpoint
    again = cli(args)
    assert again.returncode == 0, again.stderr[-2000:]
    history = json.loads((run_dir / "history.json").read_text())
    assert [e["epoch"] for e in history] == [1, 2]
    assert history[0] == written[0]
    # Killed before the checkpoint: epoch 2 is trained again (its entry replaced); after it: nothing is trained.
    assert ("epoch 2/2" in again.stdout) == (when == "before"), again.stdout
