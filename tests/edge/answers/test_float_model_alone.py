"""`edge classify` on a float model alone in a folder (no sidecar, no manifest, no metadata): raw pixels go in, as
edge.answers.classify.set_input feeds them, and the answers are the float model's.

The model is the committed float fixture (made like the pipeline's float exports: raw RGB pixels 0..255 in, the
normalization as its first layer). The reference is expected.json, the Keras model's own scores computed when the
fixture was made. pycoral's mean 128 / std 128, the fallback before, turns those pixels into [-1, 1).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.edge_paths import FLOAT, IMAGES, expected_scores, run_edge


def test_float_model_alone_gets_raw_pixels(tmp_path: Path):
    model = tmp_path / "model_float.tflite"
    shutil.copy(FLOAT, model)
    expected = expected_scores()
    names = sorted(expected)
    result = run_edge("classify", model, *[IMAGES / name for name in names], "--top-k", "1")
    assert result.exit_code == 0, result.stderr
    assert "raw pixels 0..255: a float input with no recorded pixel contract" in result.stderr
    lines = result.stdout.splitlines()
    got = {Path(lines[i].rstrip(":")).name: int(lines[i + 1].split("(id ")[1].rstrip(")")) for i in range(0, len(lines), 2)}
    want = {name: max(range(len(scores)), key=scores.__getitem__) for name, scores in expected.items()}
    assert got == want
    assert len(set(want.values())) == len(want)  # one class per image: an answer stuck on one class cannot pass


def test_float_model_alone_takes_the_flags(tmp_path: Path):
    """--input-mean/--input-std still choose the normalization of a model with nothing recorded."""
    model = tmp_path / "model_float.tflite"
    shutil.copy(FLOAT, model)
    result = run_edge("classify", model, IMAGES / "red.png", "--input-mean", "128", "--input-std", "128")
    assert result.exit_code == 0, result.stderr
    assert "input: mean 128, std 128 (--input-mean/--input-std)" in result.stderr
