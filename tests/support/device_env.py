"""Building the device environment (.ci/edge-env --make DIR) and the clients' ones for tests, with each way a
build can end told apart.

    edge = shared_env(tmp_path_factory, "edge-env") / "bin" / "edge"   # built once per pytest session

Where EDGEFLOW_ENVS names a folder (.ci/run sets it for the whole CI run), the environments are built there
instead, so `.ci/edge-env` then runs the device suite in the device venv the host suite built, not a second one.

Exit 3 of .ci/edge-env has two causes that need opposite answers: no Python 3.9 on this machine (the
test cannot run here: a skip naming that) and TensorFlow inside the device venv (the device side's
promise is broken: a failure). A registry pip could not reach is a skip naming it; anything else fails.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import REPO
from tests.support.registry import unreached
from tests.support.session_cache import built_once, session_root

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


def build(script: str, venv: Path, timeout: float = 900) -> Path:
    """`.ci/SCRIPT --make VENV`; returns VENV, or skips or fails the test by the build's real cause."""
    done = subprocess.run(["bash", str(REPO / ".ci" / script), "--make", str(venv)], capture_output=True, text=True,
                          timeout=timeout)
    what = f".ci/{script}"
    if script == "edge-env":  # its exit 3 has two causes: no Python 3.9 (skip) or TensorFlow inside (failure)
        judge(done.returncode, done.stderr, what)
        return venv
    if done.returncode == 3:  # the other scripts exit 3 for a missing python3.11 or system library, each named
        pytest.skip(f"{what}: {done.stderr.strip()}")
    if done.returncode != 0 and unreached(done.stderr):
        pytest.skip(f"{what}: the package registry could not be reached ({unreached(done.stderr)})")
    assert done.returncode == 0, f"{what} failed:\n{done.stderr[-2000:]}"
    return venv


ENVS_VARIABLE = "EDGEFLOW_ENVS"  # the folder of environments shared beyond this session (.ci/run, .ci/edge-env)


def shared_env(tmp_path_factory, script: str) -> Path:
    """The venv `.ci/SCRIPT --make` builds, built once per pytest session (or per CI run, in EDGEFLOW_ENVS) and
    shared by every xdist worker: the environments are the same for every test file that reads a model with them,
    only the models differ."""
    given = os.environ.get(ENVS_VARIABLE)
    root = Path(given) if given else session_root(tmp_path_factory)
    root.mkdir(parents=True, exist_ok=True)
    return built_once(root / script, lambda folder: build(script, folder / "venv")) / "venv"
