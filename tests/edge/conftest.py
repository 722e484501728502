"""Fixtures of the device tests: copies of the committed tiny models in tmp_path."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from edge_paths import INT8


@pytest.fixture
def int8_copy(tmp_path: Path) -> Path:
    """The int8 fixture alone in an empty directory (no sidecar, no manifest)."""
    path = tmp_path / "model_int8.tflite"
    shutil.copy(INT8, path)
    return path
