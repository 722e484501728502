"""The later stages on an imported run where it differs from a trained one: its float SavedModel may take batch 1 only
(an ONNX graph that fixes its batch keeps it) and it has no Keras model for QAT or the remedy's float edits.

The imported model is the session's tiny digits run's own SavedModel behind a batch-1 signature, imported as a
SavedModel folder (no ONNX converter needed; in one process through click's runner): `pipeline predict --model
float` feeds it batch 1 and refuses another --batch-size in one line; `export --qat-epochs` is refused naming the
missing Keras model; `export --int8 --remedy` skips the rungs that change the Keras model, saying why.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import black_frames, manifest_of

pytestmark = pytest.mark.host

SIZE = 16  # the trained_digits run's input size


def _invoke(*args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line_refusal(result, *expected: str) -> str:
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def batch_one_model(trained_digits, tmp_path_factory) -> Path:
    """The digits run's SavedModel (raw pixels 0..255 in) saved again behind a signature that takes batch 1 only."""
    import tensorflow as tf

    inner = tf.saved_model.load(str(trained_digits / "saved_model"))
    fn = inner.signatures["serving_default"]
    (name, _), = fn.structured_input_signature[1].items()

    class BatchOne(tf.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        @tf.function(input_signature=[tf.TensorSpec([1, SIZE, SIZE, 3], tf.float32, name="pixels")])
        def serve(self, pixels):
            return {"probabilities": next(iter(fn(**{name: pixels}).values()))}

    folder = tmp_path_factory.mktemp("batch_one") / "saved_model"
    module = BatchOne()
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.serve})
    return folder


@pytest.fixture(scope="module")
def imported(batch_one_model, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("imported") / "run"
    result = _invoke("import", batch_one_model, "--data", "digits", "--input-mean", "0", "--input-std", "1", "--out", run)
    assert result.exit_code == 0, (result.output, result.exception)
    return run


@pytest.fixture()
def imported_copy(imported, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(imported, tmp_path / "run"))


def test_predict_float_feeds_the_fixed_batch_and_refuses_another(imported, tmp_path):
    assert manifest_of(imported)["origin"]["float_batch"] == 1
    images = tmp_path / "images"
    images.mkdir()
    from PIL import Image

    for i in range(3):
        Image.new("RGB", (SIZE, SIZE), (80 * i, 40, 200)).save(images / f"{i}.png")
    out = tmp_path / "answers.csv"
    refused = _one_line_refusal(_invoke("predict", imported, "--data", images, "--out", out, "--batch-size", "4"),
                                "--batch-size 4", "takes batches of 1 only", "expected --batch-size 1 or none")
    assert "Traceback" not in refused and not out.exists()
    done = _invoke("predict", imported, "--data", images, "--out", out)
    assert done.exit_code == 0, (done.output, done.exception)
    rows = out.read_text().strip().splitlines()
    assert rows[0] == "id,label" and len(rows) == 4, rows
    assert "global batch 1" in done.output


def test_qat_is_refused_naming_the_missing_keras_model(imported_copy):
    before = manifest_of(imported_copy)
    result = _invoke("export", imported_copy, "--int8", "--qat-epochs", "1")
    _one_line_refusal(result, "--qat-epochs 1", "keras_model.keras", "an imported model (savedmodel: original/",
                      "expected no --qat-epochs")
    assert manifest_of(imported_copy) == before


def test_the_remedy_skips_the_rungs_that_change_the_keras_model(imported_copy, tmp_path, monkeypatch):
    """Black calibration images fail the export as asked (as in tests/test_remedy.py), so the ladder climbs; the rungs
    that need the Keras model (a float edit, distillation) are skipped with why instead of failing on a missing file."""
    from pipeline.quant import remedy, tuning_split

    monkeypatch.setattr(remedy, "LADDER", tuple(r for r in remedy.LADDER if r.name in ("bias", "distil-2")))
    monkeypatch.setattr(tuning_split, "TUNING_VIEWS", 1)  # the images themselves: cheap, and enough to fail on black
    result = _invoke("export", imported_copy, "--int8", "--remedy", "--calibration-data", black_frames(tmp_path, SIZE))
    assert result.exit_code == 1 and "no remedy passed" in result.output, (result.output, result.exception)
    record = manifest_of(imported_copy)["remedy"]
    assert [a["remedy"] for a in record["attempts"]] == ["none"] and not record["attempts"][0]["passed"]
    skipped = {s["remedy"]: s["why"] for s in record["skipped"]}
    assert set(skipped) == {"bias", "distil-2"}, skipped
    assert all("keras_model.keras" in why and "an imported model (savedmodel: original/" in why for why in skipped.values()), skipped
    assert "skipped: the bias rung changes the run's Keras model" in result.output
