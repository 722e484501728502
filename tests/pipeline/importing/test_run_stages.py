"""The later stages on an imported run where it differs from a trained one: its float SavedModel may take batch 1 only
(an ONNX graph that fixes its batch keeps it) and it has no Keras model for QAT or the remedy's float edits.

The imported model is the session's tiny digits run's own SavedModel behind a batch-1 signature, imported as a
SavedModel folder (no ONNX converter needed; in one process through click's runner): `pipeline predict --model
float` feeds it batch 1 and refuses another --batch-size in one line; `export --qat-epochs` is refused naming the
missing Keras model; `export --int8 --remedy` skips the rungs that change the Keras model, saying why. Imported with
--val-data, a seeded share of it is the ladder's tuning split, recorded by identity and disjoint from the held-out rest;
a run imported before that still exports with --remedy, judged on --data images with a note saying why that is weaker.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helpers import black_frames, manifest_of

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
    """Black calibration images fail the export as asked (as in tests/pipeline/remedy/test_ladder.py), so the ladder climbs; the rungs
    that need the Keras model (a float edit, distillation) are skipped with why instead of failing on a missing file."""
    from pipeline.remedy import ladder as remedy, tuning_split

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


# --- the tuning split an import sets aside from --val-data --------------------------------------------------------


@pytest.fixture(scope="module")
def val_folder(tmp_path_factory) -> Path:
    """80 distinct pictures in the digits' class folders (random pixels: what is checked is where each one goes)."""
    import numpy as np
    from PIL import Image

    root = tmp_path_factory.mktemp("val")
    rng = np.random.default_rng(0)
    for i in range(80):
        folder = root / str(i % 10)
        folder.mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)).save(folder / f"{i:03d}.png")
    return root


@pytest.fixture(scope="module")
def imported_with_val(batch_one_model, val_folder, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("imported_val") / "run"
    result = _invoke("import", batch_one_model, "--data", "digits", "--val-data", val_folder, "--input-mean", "0",
                     "--input-std", "1", "--out", run)
    assert result.exit_code == 0, (result.output, result.exception)
    assert "more set aside for `export --remedy`" in result.output, result.output
    return run


def test_the_tuning_split_is_a_recorded_share_of_val_data_disjoint_from_the_heldout_rest(imported_with_val, val_folder):
    from pipeline.data.identity import resolve_split
    from pipeline.remedy import tuning_split
    from pipeline.rundir.run import Run

    data = manifest_of(imported_with_val)["data"]
    identity, split = data["identity"], data["split"]
    tuning = {e[0] for e in identity["tuning"]["examples"]}
    heldout = {e[0] for e in identity["heldout"]["examples"]}
    files = {str(p.relative_to(val_folder)) for p in val_folder.rglob("*.png")}
    assert tuning and heldout and not tuning & heldout and tuning | heldout == files, (tuning, heldout)
    assert split["tuning_from"] == "--val-data" and split["tuning_fraction"] == 0.25
    assert split["tuning_examples"] == len(tuning) and split["heldout_examples"] == len(heldout)
    assert 10 <= len(tuning) <= 30  # a quarter of 80, by a seeded hash of each identity
    assert identity["train"]["count"] == split["train_examples"] == 1797  # all of --data: none of it set aside
    run = Run.open(imported_with_val)
    chosen = tuning_split.tuning_split(run, 0)
    assert chosen.set_aside and chosen.from_val and set(chosen.ids) == tuning and len(chosen.images) == len(tuning)
    assert chosen.record()["source"] == tuning_split.SET_ASIDE_VAL and "set aside from --val-data" in chosen.describe()
    assert len(resolve_split(run, "heldout")[1]) == len(heldout)


def test_the_tuning_split_is_read_again_and_a_changed_image_named(imported_with_val, val_folder, tmp_path):
    """The tuning split is read again from wherever --val-data now is, and checked for changed files as the held-out split is."""
    import shutil

    from pipeline.data.identity import resolve_split
    from pipeline.errors import DataError
    from pipeline.rundir.run import Run

    moved = Path(shutil.copytree(val_folder, tmp_path / "val"))
    run_dir = Path(shutil.copytree(imported_with_val, tmp_path / "run"))
    manifest = manifest_of(run_dir)
    manifest["data"]["val"]["spec"] = str(moved)
    first = manifest["data"]["identity"]["tuning"]["examples"][0][0]
    (run_dir / "manifest.json").write_text(__import__("json").dumps(manifest))
    run = Run.open(run_dir)
    assert len(resolve_split(run, "tuning")[1]) == manifest["data"]["split"]["tuning_examples"]
    from PIL import Image

    Image.new("RGB", (SIZE, SIZE), (1, 2, 3)).save(moved / first)
    with pytest.raises(DataError, match=f"tuning examples of .* changed since training .*changed content: {first}"):
        resolve_split(run, "tuning")


def test_an_import_before_the_val_data_share_still_exports_with_remedy_and_says_what_it_judges_on(
        imported_with_val, tmp_path, monkeypatch):
    """A run imported before the tuning split was set aside (its manifest rewritten as that version wrote it: all of
    --val-data held out, no tuning record) is judged on --data images, as before, and the ladder says why that is weaker."""
    import json
    import shutil

    from pipeline import data
    from pipeline.remedy import ladder as remedy, tuning_split

    run_dir = Path(shutil.copytree(imported_with_val, tmp_path / "run"))
    manifest = manifest_of(run_dir)
    split = manifest["data"]["split"]
    for key in ("tuning_from", "tuning_examples"):
        split.pop(key)
    split["tuning_fraction"] = 0.0
    val = data.open_source(manifest["data"]["val"]["spec"], manifest["labels"])
    manifest["data"]["identity"] = data.identity_record(data.open_source("digits"), val,
                                                        data.Split(split["heldout_fraction"], split["seed"]))
    split["heldout_examples"] = val.num_examples
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(remedy, "LADDER", ())  # the export as asked is judged: what is checked is the split and note
    monkeypatch.setattr(tuning_split, "TUNING_VIEWS", 1)
    result = _invoke("export", run_dir, "--int8", "--remedy")
    assert result.exit_code in (0, 1) and "remedy ladder on a tuning split" in result.output, (result.output, result.exception)
    assert f"note: {tuning_split.IMPORTED_NOTE}" in result.output
    record = manifest_of(run_dir)["remedy"]
    assert record["tuning_split"]["source"] == tuning_split.DRAWN and record["notes"] == [f"note: {tuning_split.IMPORTED_NOTE}"]
    assert not set(record["tuning_split"]["ids"]) & {e[0] for e in manifest["data"]["identity"]["heldout"]["examples"]}


def test_an_image_twice_in_val_data_cannot_be_both_tuning_and_heldout(val_folder, tmp_path):
    """A --val-data folder that holds a file twice under two names: the hash may split the copies apart, and the ladder
    would choose on an image parity reports; refused at import, naming both (the data step alone: no model read)."""
    import shutil

    from pipeline.errors import DataError
    from pipeline.import_model import ImportConfig
    from pipeline.tasks.classify.importer import IMPORTER

    copied = Path(shutil.copytree(val_folder, tmp_path / "val"))
    for path in sorted(copied.rglob("*.png")):
        shutil.copy(path, path.with_name("copy-" + path.name))
    config = ImportConfig(model=tmp_path / "unused", data="digits", val_data=str(copied))
    with pytest.raises(DataError, match=r"holds the same image as \S+ and \S+ \(and \d+ more\): one fell in the tuning split"):
        IMPORTER.data(config, [str(i) for i in range(10)], SIZE)
