"""Markers for hardware and tools: tests that need what this machine lacks are skipped, with the reason."""
from __future__ import annotations

import importlib.util
import os
import shutil

import pytest


def _has_tensorflow() -> bool:
    return importlib.util.find_spec("tensorflow") is not None


def _has_edgetpu() -> bool:
    # A Coral device shows up as a USB id or /dev/apex_*; the runtime library must be loadable too.
    if not (os.path.exists("/dev/apex_0") or shutil.which("lsusb")):
        return False
    try:
        import ctypes

        ctypes.CDLL("libedgetpu.so.1")
        return True
    except OSError:
        return False


_SKIPS = {
    "host": (lambda: not _has_tensorflow(), "needs TensorFlow (the host side); this is the TensorFlow-free device environment"),
    "compiler": (lambda: shutil.which("edgetpu_compiler") is None, "needs Google's edgetpu_compiler on PATH (x86-64 Linux, Coral apt repository)"),
    "edgetpu": (lambda: not _has_edgetpu(), "needs a Coral Edge TPU and libedgetpu.so.1"),
    "tpu": (lambda: not os.environ.get("TPU_NAME"), "needs a Cloud TPU named by TPU_NAME"),
}


def pytest_collection_modifyitems(config, items):
    cache = {}
    for item in items:
        for marker, (absent, reason) in _SKIPS.items():
            if marker in item.keywords:
                if marker not in cache:
                    cache[marker] = absent()
                if cache[marker]:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def exported_run(tmp_path_factory):
    """One tiny trained run with float and int8 TFLite exports, shared read-only by later-stage tests.

    Tests that change a run work on a copy (`shutil.copytree`).
    """
    from pipeline import export, train

    run_dir = tmp_path_factory.mktemp("exported") / "run"
    train.run(train.TrainConfig(data="digits", image_size=16, epochs=4), run_dir)
    export.run(export.ExportConfig(mode=export.Mode.FLOAT32), run_dir)
    export.run(export.ExportConfig(mode=export.Mode.INT8), run_dir)
    return run_dir


@pytest.fixture
def exported_copy(exported_run, tmp_path):
    """A copy of `exported_run` that a test may change (or check is left unchanged)."""
    dst = tmp_path / "exported_copy"
    shutil.copytree(exported_run, dst)
    return dst


@pytest.fixture
def existing_run_dir(tmp_path):
    """A RUN folder that already holds a user's file, which a failed train must leave alone."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("keep me")
    return run_dir
