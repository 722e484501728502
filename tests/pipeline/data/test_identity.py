"""Data identity, pinned: what training recorded about its data is what every later stage gets, or
the stage refuses and says what changed (and rewrites nothing)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.helpers import shape_image, write_class_folders

pytestmark = pytest.mark.host


def _pipeline(*args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run trained on class folders; tests copy both the data and the run."""
    root = tmp_path_factory.mktemp("identity")
    data = write_class_folders(root / "data", per_class=12)
    result = _pipeline("train", "--data", data, "--out", root / "run", "--image-size", "16", "--epochs", "1",
                       "--batch-size", "8")
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def copy(trained, tmp_path):
    """(data, run) copies whose manifest records the copied data folder."""
    shutil.copytree(trained / "data", tmp_path / "data")
    shutil.copytree(trained / "run", tmp_path / "run")
    manifest_path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["data"]["train"]["spec"] = str(tmp_path / "data")
    manifest_path.write_text(json.dumps(manifest))
    return tmp_path / "data", tmp_path / "run"


def _new_file_id(data: Path, heldout: bool) -> str:
    """A new file name in class 'square' that the seeded split puts on the wanted side."""
    from pipeline.data import Example, Split, heldout_mask

    for i in range(1000):
        ident = f"square/new_{i}.png"
        if heldout_mask([Example(ident, 0, "")], Split())[0] == heldout:
            return ident
    raise AssertionError("no name found")


def _write_image(path: Path, seed: int) -> None:
    Image.fromarray(shape_image(0, np.random.default_rng(seed))).save(path)


def _refused(result, *words, run: Path, before: bytes):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.output, result.output
    assert (run / "manifest.json").read_bytes() == before  # nothing rewritten


def test_a_file_added_to_the_heldout_side_is_named_by_parity(copy):
    data, run = copy
    ident = _new_file_id(data, heldout=True)
    _write_image(data / ident, 7)
    before = (run / "manifest.json").read_bytes()
    _refused(_pipeline("parity", run), "held-out examples", f"added: {ident}", run=run, before=before)


def test_a_file_added_to_the_training_side_is_refused_by_export(copy):
    data, run = copy
    ident = _new_file_id(data, heldout=False)
    _write_image(data / ident, 8)
    before = (run / "manifest.json").read_bytes()
    identity = json.loads(before)["data"]["identity"]
    recorded = identity["train"]["per_class"][identity["classes"].index("square")]
    _refused(_pipeline("export", run, "--int8"), "training examples", f"square: {recorded} -> {recorded + 1}",
             run=run, before=before)
    assert not (run / "model_int8.tflite").exists()


def test_a_renamed_class_is_refused(copy):
    data, run = copy
    (data / "hbar").rename(data / "horizontal")
    before = (run / "manifest.json").read_bytes()
    _refused(_pipeline("parity", run), "classes", "'hbar'", "'horizontal'", run=run, before=before)
    _refused(_pipeline("export", run, "--int8"), "classes", run=run, before=before)


def test_a_changed_heldout_image_is_named(copy):
    data, run = copy
    ident = json.loads((run / "manifest.json").read_text())["data"]["identity"]["heldout"]["examples"][0][0]
    _write_image(data / ident, 99)
    before = (run / "manifest.json").read_bytes()
    _refused(_pipeline("parity", run), f"changed content: {ident}", run=run, before=before)


def test_calibration_never_draws_from_the_heldout_examples(copy):
    from pipeline import data as data_mod
    from pipeline import export
    from pipeline.quant.calibration import calibration_images
    from pipeline.rundir.run import Run

    _, run = copy
    manifest = Run.open(run).manifest
    # Every training image, all of them: calibration can then only be drawn from these.
    images, _, _, _ = calibration_images(Run.open(run), export.ExportConfig(mode=export.Mode.INT8, calibration_samples=10_000), 16)
    heldout, _ = data_mod.load_split(Run.open(run), "heldout")
    calibration = {image.tobytes() for image in images}
    assert len(calibration) == len(images) > 0  # the noisy pictures are all different
    assert not calibration & {image.tobytes() for image in heldout}
    recorded = manifest["data"]["identity"]
    assert len(images) == recorded["train"]["count"] and len(heldout) == recorded["heldout"]["count"]
    # The tuning split training set aside is neither: calibration does not draw from it either.
    tuning, _ = data_mod.load_split(Run.open(run), "tuning")
    assert not calibration & {image.tobytes() for image in tuning}
    assert recorded["train"]["count"] + recorded["heldout"]["count"] + recorded["tuning"]["count"] == 36


def test_parity_data_refuses_images_the_run_trained_on_and_scores_new_ones(copy, tmp_path):
    """`pipeline parity RUN --data SPEC` of a classifier: a set holding a training image (under another name too) is
    refused by content, for a run recorded before the training digests as well (its training data read again); a set
    of new images is scored, and report.json says what was checked."""
    data, run = copy
    mixed = write_class_folders(tmp_path / "mixed", per_class=3)  # drawn from another seed below: new images
    for name in ("square", "hbar", "vbar"):
        for i in range(3):
            _write_image(mixed / name / f"{i:03d}.png", 1000 + 10 * len(name) + i)
    manifest = json.loads((run / "manifest.json").read_text())
    from pipeline.data.examples import digest

    trained = set(manifest["data"]["identity"]["train_digests"])
    trained_on = next(d for d in sorted((data / "square").iterdir()) if digest(d.read_bytes()) in trained)
    shutil.copy(trained_on, mixed / "square" / "renamed.png")
    before = (run / "manifest.json").read_bytes()
    _refused(_pipeline("parity", run, "--data", mixed), f"--data {mixed}: 1 of its 10 images are ones this run trained on",
             "square/renamed.png", run=run, before=before)
    del manifest["data"]["identity"]["train_digests"]  # as recorded before the digests: read again from the data
    (run / "manifest.json").write_text(json.dumps(manifest))
    before = (run / "manifest.json").read_bytes()
    _refused(_pipeline("parity", run, "--data", mixed), "1 of its 10 images are ones this run trained on", run=run,
             before=before)

    (mixed / "square" / "renamed.png").unlink()
    assert _pipeline("export", run, "--int8").exit_code == 0
    result = _pipeline("parity", run, "--data", mixed, "--max-drop", "100", "--min-agreement", "0", "--min-accuracy", "0")
    assert result.exit_code == 0, result.output
    heldout = json.loads((run / "parity" / "report.json").read_text())["heldout"]
    assert heldout["images"] == 9 and heldout["source"] == str(mixed) and heldout["trained_on_checked"] is True
    assert heldout["checked_against"].startswith("the ") and "read again from" in heldout["checked_against"]
