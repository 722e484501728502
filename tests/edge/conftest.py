"""Fixtures of the device tests: copies of the committed tiny models in tmp_path."""
from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.edge_paths import INT8


@pytest.fixture
def int8_copy(tmp_path: Path) -> Path:
    """The int8 fixture alone in an empty directory (no sidecar, no manifest)."""
    path = tmp_path / "model_int8.tflite"
    shutil.copy(INT8, path)
    return path


@pytest.fixture
def fake_packages(tmp_path: Path, monkeypatch):
    """Put packages of our making (a fake pycoral, tflite_runtime) first on sys.path; forget them and the
    cached interpreter backend afterwards."""
    from edge.model import interpreter as interp

    names = ("pycoral", "tflite_runtime")

    def forget():
        for name in [m for m in sys.modules if m.split(".")[0] in names]:
            del sys.modules[name]

    def install(files: dict) -> None:
        for rel, text in files.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        monkeypatch.syspath_prepend(str(tmp_path))
        importlib.invalidate_caches()

    forget()
    monkeypatch.setattr(interp, "_backend_cache", None)
    yield install
    forget()
