"""tests/support/session_cache.py: what the suite builds once per session is built once, and never read half-built."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.helpers import REPO
from tests.support.session_cache import built_once


def test_the_second_caller_gets_the_first_callers_files(tmp_path):
    builds = []

    def build(folder):
        builds.append(folder)
        (folder / "model.bin").write_bytes(b"weights")

    first = built_once(tmp_path / "thing", build)
    second = built_once(tmp_path / "thing", build)
    assert first == second == tmp_path / "thing" and len(builds) == 1
    assert (second / "model.bin").read_bytes() == b"weights"


def test_a_build_that_crashed_halfway_is_built_again_from_an_empty_folder(tmp_path):
    def crash(folder):
        (folder / "half.bin").write_bytes(b"half")
        raise RuntimeError("killed mid-build")

    with pytest.raises(RuntimeError, match="killed mid-build"):
        built_once(tmp_path / "thing", crash)
    seen = []

    def build(folder):
        seen.extend(p.name for p in folder.iterdir())
        (folder / "whole.bin").write_bytes(b"whole")

    folder = built_once(tmp_path / "thing", build)
    assert seen == [] and sorted(p.name for p in folder.iterdir()) == ["whole.bin"]


_RACER = r"""
import sys, time
from pathlib import Path
from tests.support.session_cache import built_once

def build(folder):
    with open(sys.argv[2], "a") as log:
        log.write("build\n")
    time.sleep(1)  # long enough for the other process to ask while this one builds
    (folder / "done").write_text("yes")

print((built_once(Path(sys.argv[1]), build) / "done").read_text())
"""


def test_two_processes_asking_at_once_build_once(tmp_path):
    log = tmp_path / "builds.log"
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(tmp_path / "thing"), str(log)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [r.communicate(timeout=60) for r in racers]
    assert [r.returncode for r in racers] == [0, 0], [err for _, err in outs]
    assert [out.strip() for out, _ in outs] == ["yes", "yes"]
    assert log.read_text() == "build\n"


def test_environments_are_built_in_edgeflow_envs_when_it_is_set(tmp_path, tmp_path_factory, monkeypatch):
    """.ci/run sets EDGEFLOW_ENVS for the whole CI run: the device venv is built there once, with the marker
    .ci/edge-env looks for before it reuses the venv for the device suite."""
    from tests.support import device_env

    builds = []

    def build(script, venv):
        builds.append(script)
        (venv / "bin").mkdir(parents=True)
        return venv

    monkeypatch.setattr(device_env, "build", build)
    monkeypatch.setenv(device_env.ENVS_VARIABLE, str(tmp_path / "envs"))
    first = device_env.shared_env(tmp_path_factory, "edge-env")
    second = device_env.shared_env(tmp_path_factory, "edge-env")
    assert first == second == tmp_path / "envs" / "edge-env" / "venv" and builds == ["edge-env"]
    assert (tmp_path / "envs" / "edge-env.complete").exists()  # what .ci/edge-env checks
    assert 'shared="${EDGEFLOW_ENVS:+$EDGEFLOW_ENVS/edge-env}"' in (REPO / ".ci" / "edge-env").read_text()
    assert '-e "$shared.complete"' in (REPO / ".ci" / "edge-env").read_text()
