"""Building the device environment (.ci/edge-env --make DIR) and the clients' ones for tests, with each way a
build can end told apart.

    edge = make_device_env(tmp / "venv") / "bin" / "edge"
    python = shared_env(tmp_path_factory, "mediapipe-env") / "bin" / "python"   # once per pytest session

Exit 3 of .ci/edge-env has two causes that need opposite answers: no Python 3.9 on this machine (the
test cannot run here: a skip naming that) and TensorFlow inside the device venv (the device side's
promise is broken: a failure). A registry pip could not reach is a skip naming it; anything else fails.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.registry import unreached
from tests.session_cache import built_once, session_root

NO_PYTHON39 = "no Python 3.9 found"  # .ci/edge-env's words for each cause of its exit 3
TENSORFLOW_INSIDE = "TensorFlow is importable in the device venv"


def judge(returncode: int, stderr: str, what: str = ".ci/edge-env") -> None:
    """Return when the build succeeded; else skip or fail the test by the build's real cause."""
    if returncode == 0:
        return
    if returncode == 3 and NO_PYTHON39 in stderr:
        pytest.skip(f"{what}: this machine has no Python 3.9 for the device environment ({stderr.strip()[-300:]})")
    if returncode == 3 and TENSORFLOW_INSIDE in stderr:
        pytest.fail(f"{what}: TensorFlow got into the device venv, which must run without it:\n{stderr.strip()[-1500:]}")
    missing = unreached(stderr)
    if missing:
        pytest.skip(f"{what}: the package registry could not be reached ({missing})")
    pytest.fail(f"{what} failed (exit {returncode}):\n{stderr.strip()[-2000:]}")


def make_device_env(venv: Path, timeout: float = 900) -> Path:
    """`.ci/edge-env --make VENV`; returns VENV (skips or fails by the cause when it cannot be built)."""
    made = subprocess.run(["bash", str(REPO / ".ci" / "edge-env"), "--make", str(venv)], capture_output=True, text=True,
                          timeout=timeout)
    judge(made.returncode, made.stderr)
    return venv


def start_build(script: str, venv: Path) -> subprocess.Popen:
    """Start `.ci/SCRIPT --make VENV` in the background (several environments build while a model trains)."""
    return subprocess.Popen(["bash", str(REPO / ".ci" / script), "--make", str(venv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish_build(script: str, proc: subprocess.Popen, timeout: float = 900) -> None:
    """Wait for a build from `start_build`; skip or fail by its real cause."""
    _, err = proc.communicate(timeout=timeout)
    what = f".ci/{script}"
    if script == "edge-env":  # its exit 3 has two causes: no Python 3.9 (skip) or TensorFlow inside (failure)
        judge(proc.returncode, err, what)
        return
    if proc.returncode == 3:  # the other scripts exit 3 only for a missing python3.11
        pytest.skip(f"{what}: {err.strip()}")
    if proc.returncode != 0 and unreached(err):
        pytest.skip(f"{what}: the package registry could not be reached ({unreached(err)})")
    assert proc.returncode == 0, f"{what} failed:\n{err[-2000:]}"


def shared_env(tmp_path_factory, script: str) -> Path:
    """The venv `.ci/SCRIPT --make` builds, built once per pytest session and shared by every xdist worker: the
    environments are the same for every test file that reads a model with them, only the models differ."""
    return built_once(session_root(tmp_path_factory) / script,
                      lambda folder: finish_build(script, start_build(script, folder / "venv"))) / "venv"
