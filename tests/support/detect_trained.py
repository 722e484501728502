"""The one shapes detector the detection tests read: `pipeline train --task detect` (12 epochs on 320 `shapes`
images at 128 px), then a copy exported float and int8, built once per pytest session for every xdist worker
(tests/support/session_cache.py) and shared read-only: a test that changes a run works on `copy_of` it (tests/support/helpers.py).

    built = detector_once(session_folder)
    built.trained, built.printed    # the run as `pipeline train` left it, and what that command printed
    built.exported                  # a copy of it after `pipeline export` and `pipeline export --int8`
    trained_once(session_folder)    # the exported run as the Keras model, its two TFLite files and held-out PNGs

What reads it: test_detect_train (training's manifest and printed lines; export, compile, parity, predict and the
bundle on copies of the exported run), test_detect_export (the two TFLite files and the held-out images),
test_detect_remedy (a copy of the trained run, calibrated on black frames), test_detect_clients (the int8 file
alone, in pycoral's, Frigate's and MediaPipe's programs)."""
from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

from tests.support.helpers import cli
from tests.support.session_cache import built_once

DATA = "shapes?count=320&size=128&seed=1"
SIZE = 128  # at 64 px objects are a few pixels and a short training finds almost none
EPOCHS = 12
BATCH = 16
CALIBRATION_SAMPLES = 32  # the int8 export's training images: enough for its mAP@.5 to stay within 3 pp of float's


def train_and_export(folder: Path) -> None:
    """Train (FOLDER/trained, its printed lines in train.stdout), export a copy both ways (FOLDER/exported), and
    write the held-out images as PNG files (FOLDER/heldout), as a user would hand them to a client."""
    trained, exported = folder / "trained", folder / "exported"
    result = cli(["train", "--task", "detect", "--data", DATA, "--image-size", str(SIZE), "--epochs", str(EPOCHS),
                  "--batch-size", str(BATCH), "--out", str(trained)], timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (folder / "train.stdout").write_text(result.stdout)
    shutil.copytree(trained, exported)
    for args in ([], ["--int8", "--calibration-samples", str(CALIBRATION_SAMPLES)]):
        result = cli(["export", str(exported), *args], timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
    images = folder / "heldout"
    images.mkdir()
    for e in _heldout(exported):
        (images / _file_name(e)).write_bytes(e.image)


def detector_once(root: Path) -> SimpleNamespace:
    """The folders of `train_and_export`, built by the first caller in this pytest session (ROOT is the session's
    shared folder). Read only: copy a run before changing it."""
    folder = built_once(root / "detector", train_and_export)
    return SimpleNamespace(trained=folder / "trained", exported=folder / "exported", heldout=folder / "heldout",
                           printed=(folder / "train.stdout").read_text())


def trained_once(root: Path, keras: bool = True) -> SimpleNamespace:
    """The exported detector as the export and client tests take it: its Keras model (KERAS=False leaves it out,
    `model` None, for callers that run only the exported files), anchor spec, labels, post-processing settings,
    held-out examples and their PNG files (checked byte for byte against the images training held out), and the
    float and int8 TFLite files."""
    from pipeline.tasks.detect.heads.ssd.postprocess import Settings
    from pipeline.rundir.run import Run
    from pipeline.tasks.detect.export import recorded_anchor_spec

    built = detector_once(root)
    run = Run.open(built.exported)
    heldout = _heldout(built.exported)
    files = [built.heldout / _file_name(e) for e in heldout]
    for e, path in zip(heldout, files):
        assert path.read_bytes() == e.image, f"{path} is not held-out image {e.id} of {DATA}"
    model = None
    if keras:
        import tf_keras

        model = tf_keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    settings = Settings(**run.entry("model_int8")["postprocess"])  # what the export recorded it used
    return SimpleNamespace(model=model, spec=recorded_anchor_spec(run), labels=run.labels, settings=settings,
                           heldout=heldout, files=files, float=run.artifact("model_float"), int8=run.artifact("model_int8"))


def _heldout(run_dir: Path) -> list:
    from pipeline.tasks.detect.data.heldout import recorded_heldout
    from pipeline.rundir.run import Run

    return recorded_heldout(Run.open(run_dir))


def _file_name(example) -> str:
    return example.id.replace("/", "_") + ".png"  # shapes' ids have no suffix; a user's files are PNGs
