"""Paths of the committed fixtures (tests/fixtures), the `edge` CLI runner and a bare-interpreter reference, shared by the device tests."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
INT8 = FIXTURES / "tiny_int8.tflite"
FLOAT = FIXTURES / "tiny_float.tflite"
EDGETPU = FIXTURES / "tiny_edgetpu.tflite"
IMAGES = FIXTURES / "images"
LABELS = ["red", "green", "blue"]
# Google's models and their compiled twins, beside the repository (nothing here made them)
CORAL = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "coral"


def expected_scores():
    """The Keras float model's softmax per test image, computed by make_fixtures.py (an independent reference)."""
    return json.loads((FIXTURES / "expected.json").read_text())["scores"]

def bare_scores(model, pixels):
    """Scores by the bare interpreter API on a fresh interpreter: set_tensor / invoke / get_tensor, raw pixels
    quantized and scores dequantized by hand (a reference computed without edge.answers.classify)."""
    from edge.model.interpreter import make_interpreter

    interpreter = make_interpreter(model)
    ind, outd = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    if ind["dtype"] == np.float32:
        x = pixels.astype(np.float32)
    else:
        s, z = ind["quantization"]
        x = np.clip(np.rint(pixels / s) + z, 0, 255).astype(ind["dtype"])
    interpreter.set_tensor(ind["index"], x[None])
    interpreter.invoke()
    y = interpreter.get_tensor(outd["index"])[0]
    if outd["dtype"] == np.float32:
        return y
    s, z = outd["quantization"]
    return (y.astype(np.int64) - z) * s


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
