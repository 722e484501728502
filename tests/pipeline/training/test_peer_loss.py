"""A MultiWorkerMirroredStrategy worker whose peer dies stops with a message saying how to resume, not a gRPC traceback.

Two real worker processes on 127.0.0.1 sharing one --out (as workers on a shared disk do); the second is
killed after the chief's second epoch. Then both are restarted with the same commands, as the message
says, and the run finishes.
"""
from __future__ import annotations

import json

import pytest

from tests.support.helpers import free_port, start_worker

pytestmark = [pytest.mark.host, pytest.mark.slow]

EPOCHS = 6


def _start_workers(tmp_path, workers):
    args = ["train", "--data", "digits", "--out", str(tmp_path / "run"), "--epochs", str(EPOCHS), "--image-size", "16"]
    return [start_worker(index, workers, args) for index in range(2)]


def test_lost_peer_is_explained_and_a_restart_resumes(tmp_path):
    workers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    chief, other = _start_workers(tmp_path, workers)
    try:
        lines = []
        for line in chief.stdout:
            lines.append(line)
            if line.startswith("epoch 2/"):
                other.kill()
                break
        out, err = chief.communicate(timeout=150)
    finally:
        for proc in (chief, other):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    assert lines and lines[-1].startswith("epoch 2/"), "".join(lines) + err[-2000:]
    assert chief.returncode == 3, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "lost contact with another worker" in err
    assert "restart every worker with the same command and the same --out" in err and str(tmp_path / "run") in err
    assert not (tmp_path / "run" / "manifest.json").exists()
    assert (tmp_path / "run" / ".train_state" / "history.json").exists()  # what a restart continues from

    procs = _start_workers(tmp_path, workers)
    outputs = [proc.communicate(timeout=180) for proc in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-2000:]
    assert "resuming from epoch" in outputs[0][0]
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert [e["epoch"] for e in history] == list(range(1, EPOCHS + 1))
