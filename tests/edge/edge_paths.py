"""Paths of the committed fixtures (tests/fixtures) and the `edge` CLI runner, shared by the device tests."""
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


def run_edge(*args):
    """`edge ARGS` through click's CliRunner, stderr apart from stdout."""
    from click.testing import CliRunner

    from edge.cli import main

    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2 mixes stderr in unless asked not to
    except TypeError:
        runner = CliRunner()
    return runner.invoke(main, [str(a) for a in args])
