"""`edge classify` on a model Google made, fed as pycoral feeds it: the answer pycoral gives, not noise.

The expected class is a published fact about the reference (its README: class 89, macaw, about
0.75), not something this project computed.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.edge_paths import CORAL, run_edge

MODEL = CORAL / "mobilenet_v1_0.25_128_quant.tflite"
COMPILED = CORAL / "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
PARROT = CORAL / "parrot.jpg"
pytestmark = pytest.mark.skipif(not MODEL.is_file(), reason=f"reference models not at {CORAL}")


_run = run_edge


def _first(stdout: str):
    line = stdout.splitlines()[1].split()
    return float(line[0]), " ".join(line[1:-2]), line[-1]


@pytest.mark.parametrize("labels", [("--labels", CORAL / "imagenet_labels.txt"), ()], ids=["labels-file", "packed-labels"])
def test_parrot_is_a_macaw(labels):
    result = _run("classify", MODEL, PARROT, "--top-k", "3", *labels)
    assert result.exit_code == 0, result.stderr
    score, label, class_id = _first(result.stdout)
    assert label == "macaw" and class_id == "89)"
    assert 0.65 < score < 0.85  # pycoral's answer is about 0.75
    # The user sees how pixels and labels were chosen.
    assert "mean 127.5, std 127.5 (the model's TFLite metadata)" in result.stderr
    assert ("imagenet_labels.txt" if labels else "packed in the model's metadata") in result.stderr


def test_pycoral_default_normalization_also_gives_macaw_and_passes_raw_pixels():
    # Mean 128, std 128 is exactly this input's quantization (scale 1/128, zero point 128): raw pixels go in.
    result = _run("classify", MODEL, PARROT, "--input-mean", "128", "--input-std", "128")
    assert result.exit_code == 0, result.stderr
    assert _first(result.stdout)[1] == "macaw"
    assert "raw pixels pass straight into the uint8 input (scale 0.0078125, zero point 128)" in result.stderr


def test_the_library_fed_without_a_normalization_answers_as_pycoral():
    """edge.answers.classify with no normalization, as a library user calls it: the bytes go in as pycoral's set_input puts
    them, and Google's model names the parrot (it used to feed mean 0, std 1 here, which the test below shows wrong)."""
    from PIL import Image

    from edge import classify
    from edge import make_interpreter

    labels = (CORAL / "imagenet_labels.txt").read_text().splitlines()
    with Image.open(PARROT) as image:
        best = classify(make_interpreter(MODEL), image.convert("RGB"), k=1, labels=labels)
    assert best[0].id == 89 and "macaw" in best[0].label and 0.65 < best[0].score < 0.85


def test_wrong_normalization_changes_the_answer():
    # The test above could pass by accident only if normalization did not matter; here it must.
    result = _run("classify", MODEL, PARROT, "--input-mean", "0", "--input-std", "1")
    assert result.exit_code == 0
    assert _first(result.stdout)[1] != "macaw"


def test_the_compiled_twin_needs_the_edge_tpu(tmp_path: Path):
    result = _run("classify", COMPILED, PARROT)
    assert result.exit_code == 2
    assert "needs the Edge TPU" in result.stderr and "Traceback" not in result.stderr
