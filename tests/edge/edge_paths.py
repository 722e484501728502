"""Paths of the committed fixtures (tests/fixtures), shared by the device tests."""
from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
INT8 = FIXTURES / "tiny_int8.tflite"
FLOAT = FIXTURES / "tiny_float.tflite"
EDGETPU = FIXTURES / "tiny_edgetpu.tflite"
IMAGES = FIXTURES / "images"
LABELS = ["red", "green", "blue"]


def expected_scores():
    """The Keras float model's softmax per test image, computed by make_fixtures.py (an independent reference)."""
    return json.loads((FIXTURES / "expected.json").read_text())["scores"]

# Google's own models and photo (read its README); never copied into the project.
CORAL = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "coral"
