"""`pipeline compile` ends the compiler's whole process group however it stops: Ctrl-C, SIGTERM, a timeout, an
error, a normal end.

The compiler runs in a session of its own, so the terminal's Ctrl-C never reaches it; left alone it would go on
writing into a scratch folder the stopped command removes. The real edgetpu_compiler is not installable here:
tests/doubles/edgetpu_compiler_double.py stands in for it (a double, because no real compiler exists on this
machine); here it only sleeps or exits and writes its pid and its child's to a file. What is checked is real: the
processes named in that file, the exit code, and the run directory's bytes.
"""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.rundir.lock import HOLDER_NAME, LOCK_NAME
from tests.support.helpers import REPO, quiet_env, tree_snapshot
from tests.pipeline.test_compile import DOUBLE, FULL, reference_run

pytestmark = pytest.mark.slow

START_LIMIT_S = 180  # the command imports its modules and runs the pre-flight before it starts the compiler
GONE_LIMIT_S = 10  # a killed process is reaped by the kernel and its parent within this


@pytest.fixture
def compiler(tmp_path):
    """An executable named like the compiler that runs the double with this interpreter."""
    path = tmp_path / "bin" / "edgetpu_compiler"
    path.parent.mkdir()
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(DOUBLE)!r}, run_name='__main__')\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie has ended: it only waits for its parent to read its exit status)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _wait_for_pids(pid_file: Path, process: subprocess.Popen, count: int):
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if pid_file.exists():
            pids = [int(line) for line in pid_file.read_text().split()]
            if len(pids) == count:
                return pids
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"pipeline compile ended (exit {process.returncode}) before the compiler started:\n{out}\n{err}")
        time.sleep(0.1)
    process.kill()
    pytest.fail(f"the compiler double did not write {pid_file} within {START_LIMIT_S} s")


def _assert_gone(pids):
    deadline = time.monotonic() + GONE_LIMIT_S
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in pids if _alive(pid)]
    for pid in survivors:  # do not leave them running after a failed test
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"compiler process(es) {survivors} of {pids} still run after pipeline compile ended"


def _snapshot(run_dir: Path) -> dict:
    """The run's files and bytes, apart from the writer lock's own files (the lock is not the run's content)."""
    return {k: v for k, v in tree_snapshot(run_dir).items() if k not in (LOCK_NAME, HOLDER_NAME)}


def _start(run_dir: Path, compiler: Path, mode: str, pid_file: Path, *extra: str) -> subprocess.Popen:
    env = quiet_env(EDGETPU_DOUBLE_MODE=mode, EDGETPU_DOUBLE_PIDS=str(pid_file))
    # A session of its own: the signal a test sends goes to this command alone, never to the pytest worker's group.
    return subprocess.Popen([sys.executable, "-m", "pipeline", "compile", str(run_dir), "--compiler", str(compiler), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                            start_new_session=True)


@pytest.mark.usefixtures("ctrl_c_as_at_a_terminal")
@pytest.mark.parametrize("signum, code, words", [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                                 (signal.SIGINT, 130, "interrupted (Ctrl-C)")])
def test_a_signal_ends_the_compiler_and_its_child_and_leaves_the_run(tmp_path, compiler, signum, code, words):
    run_dir = reference_run(tmp_path, FULL)
    before = _snapshot(run_dir)
    pid_file = tmp_path / "pids"
    process = _start(run_dir, compiler, "hang-child", pid_file)
    pids = _wait_for_pids(pid_file, process, 2)
    assert all(_alive(pid) for pid in pids)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert words in err and "Traceback" not in err
    _assert_gone(pids)
    assert _snapshot(run_dir) == before
    assert not list(run_dir.glob(".compile-*"))


def test_a_timeout_ends_the_compiler_and_its_child(tmp_path, compiler):
    run_dir = reference_run(tmp_path, FULL)
    before = _snapshot(run_dir)
    pid_file = tmp_path / "pids"
    process = _start(run_dir, compiler, "hang-child", pid_file, "--timeout", "1")
    out, err = process.communicate(timeout=START_LIMIT_S)
    assert process.returncode == 1 and "did not finish within 2 s" in err, err
    _assert_gone([int(line) for line in pid_file.read_text().split()])
    assert _snapshot(run_dir) == before


def test_a_child_left_behind_by_a_compiler_that_ended_is_ended(tmp_path, compiler):
    """The compiler exits while a child it started still runs: the command ends the child before it returns."""
    run_dir = reference_run(tmp_path, FULL)
    pid_file = tmp_path / "pids"
    process = _start(run_dir, compiler, "leave-child", pid_file)
    out, err = process.communicate(timeout=START_LIMIT_S)
    assert process.returncode == 0, err
    pids = [int(line) for line in pid_file.read_text().split()]
    assert len(pids) == 2
    _assert_gone(pids)
    assert (run_dir / "model_int8_edgetpu.tflite").is_file()


def test_a_failed_compile_ends_the_child_too(tmp_path, compiler):
    """The compiler fails (exit 1: the double has no segmented twins, so it refuses any -n) while its child still
    runs: the stage's error ends the child too, and the run is left as it was."""
    run_dir = reference_run(tmp_path, FULL)
    before = _snapshot(run_dir)
    pid_file = tmp_path / "pids"
    process = _start(run_dir, compiler, "leave-child", pid_file, "--num-segments", "2")
    out, err = process.communicate(timeout=START_LIMIT_S)
    assert process.returncode == 1 and "edgetpu_compiler exited with code 1" in err, err
    _assert_gone([int(line) for line in pid_file.read_text().split()])
    assert _snapshot(run_dir) == before
