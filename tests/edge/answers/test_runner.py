"""The device runner: one score loop for every command, the same scores as the bare interpreter API, the
model-opening policy in one place, and Google's reference model still a macaw through it."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edge.pixels.contract import PixelContract
from edge.errors import InputError, IntegrityError, ModelLoadError, exits_cleanly
from edge.model.integrity import sha256_bytes, write_sidecar
from edge.pixels.preprocess import RAW_PIXELS
from edge.answers.runner import Runner
from tests.support.edge_paths import CORAL, FLOAT, IMAGES, INT8, LABELS, bare_scores

NAMES = ["red", "green", "blue"]


@pytest.fixture(scope="module")
def pixels():
    return {name: np.asarray(Image.open(IMAGES / f"{name}.png").convert("RGB").resize((16, 16), Image.BILINEAR)) for name in NAMES}


@pytest.mark.parametrize("model", [INT8, FLOAT], ids=["int8", "float"])
def test_every_score_path_equals_the_bare_interpreter(model, pixels):
    runner = Runner.with_contract(model, PixelContract(), edgetpu=False, labels=LABELS)
    expected = {name: bare_scores(model, p) for name, p in pixels.items()}
    for name, p in pixels.items():
        assert np.allclose(runner.scores(p), expected[name], atol=1e-6)
    batch = runner.score_all(np.stack([pixels[n] for n in NAMES]))
    assert batch.dtype == np.float32 and np.allclose(batch, np.stack([expected[n] for n in NAMES]), atol=1e-6)
    # Files, decoded ahead on the worker: the same scores, in the order given.
    files = [IMAGES / f"{n}.png" for n in ("blue", "red", "green", "red")]
    got = list(runner.score_files(files))
    assert [item for item, _, _ in got] == files and all(error is None for _, _, error in got)
    for path, scores, _ in got:
        assert np.allclose(scores, bare_scores(model, runner.pixels(path)), atol=1e-6)
    assert [c.label for c in runner.classify(IMAGES / "green.png", k=1)] == ["green"]


def test_a_file_that_cannot_be_read_stays_with_its_item_and_the_rest_are_scored(tmp_path: Path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    runner = Runner.with_contract(INT8, PixelContract(), labels=LABELS)
    got = list(runner.score_files([IMAGES / "red.png", bad, IMAGES / "blue.png"]))
    assert [s is None for _, s, _ in got] == [False, True, False]
    assert isinstance(got[1][2], InputError) and "bad.png" in str(got[1][2])
    assert [runner.top_k(s)[0].label for _, s, _ in (got[0], got[2])] == ["red", "blue"]


def test_open_checks_the_sidecar_and_takes_its_contract_and_labels(tmp_path: Path):
    model = tmp_path / "model_int8.tflite"
    shutil.copy(INT8, model)
    write_sidecar(model, labels=LABELS, preprocessing=PixelContract(RAW_PIXELS, 1).as_record())
    said = []
    runner = Runner.open(model, say=said.append)
    assert runner.sha256 == sha256_bytes(model.read_bytes()) and runner.labels == LABELS
    assert runner.contract.version == 1 and runner.contract.norm.mean == RAW_PIXELS.mean
    assert runner.contract.norm.source == f"recorded in {model}.json"
    assert any(line.startswith("interpreter: ") for line in said) and "labels: recorded next to the model" in said
    with pytest.raises(InputError, match="--input-mean/--input-std do not apply"):
        Runner.open(model, mean=[128.0])
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="this is not the model that was recorded"):
        Runner.open(model)
    said.clear()
    assert Runner.open(model, verify_sha256=False, say=said.append).sha256 == sha256_bytes(bytes(data))
    assert said[0].startswith("WARNING: --no-verify")


class RefusesAtInvoke:
    """A test double: the real interpreter, except that invoke fails as a model that loads but cannot run
    does (Coral's model_invoking_error.tflite is refused earlier, by edge.model.check)."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def invoke(self):
        raise RuntimeError("Node number 3 (CONV_2D) failed to prepare.\n")


def test_a_model_that_fails_at_invoke_is_one_clean_error_naming_the_image(pixels):
    runner = Runner.with_contract(INT8, PixelContract())
    runner.interpreter = RefusesAtInvoke(runner.interpreter)
    with pytest.raises(ModelLoadError, match=r"the interpreter failed on cat.png: Node number 3 \(CONV_2D\) failed to prepare.$"):
        runner.scores(pixels["red"], "cat.png")


def test_exits_cleanly_prints_one_line_and_exits_with_the_errors_code(capsys):
    @exits_cleanly(InputError)
    def command(error):
        raise error

    with pytest.raises(SystemExit) as exit_:
        command(InputError("image cat.png not found"))
    assert exit_.value.code == 1 and capsys.readouterr().err == "error: image cat.png not found\n"
    with pytest.raises(KeyError):  # not one of the listed types: a bug, with its traceback
        command(KeyError("x"))


MODEL = CORAL / "mobilenet_v1_0.25_128_quant.tflite"


@pytest.mark.skipif(not MODEL.is_file(), reason=f"reference models not at {CORAL}")
def test_googles_reference_model_calls_the_parrot_a_macaw_through_the_runner():
    said = []
    runner = Runner.open(MODEL, say=said.append)
    assert not runner.contract.recorded and runner.contract.norm.source == "the model's TFLite metadata"
    best = runner.classify(CORAL / "parrot.jpg", k=1)[0]
    assert (best.id, best.label) == (89, "macaw") and 0.65 < best.score < 0.85  # its README: macaw, about 0.75


@pytest.mark.skipif(not MODEL.is_file(), reason=f"reference models not at {CORAL}")
def test_opening_a_model_without_a_sidecar_parses_its_metadata_once(monkeypatch):
    # Counts the real parser's calls (it still does the parsing): the contract and the labels both come from it.
    from edge.model import metadata as model_metadata

    parsed = []
    real = model_metadata._parse
    monkeypatch.setattr(model_metadata, "_parse", lambda blob, where: parsed.append(where) or real(blob, where))
    runner = Runner.open(MODEL)
    assert runner.contract.norm.source == "the model's TFLite metadata" and runner.labels[89] == "macaw"
    assert len(parsed) == 1, parsed
