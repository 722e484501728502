"""`pipeline import` refuses what it cannot honour with one line naming the problem and what was expected, exit 1,
and nothing written: a file that is not the format it claims, a model with no image input, a dynamic size without
--image-size, labels or data classes that do not match the outputs, options that contradict the model, a
--tuning-fraction without --val-data or out of [0, 1). Run in one process (click's runner): TensorFlow and Keras
start once for every case.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helpers import write_class_folders

pytestmark = pytest.mark.host


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_class_folders(tmp_path_factory.mktemp("refusals") / "shapes", per_class=6)


def _keras_file(folder: Path, name: str, shape, outputs: int = 3, rescale: bool = True) -> Path:
    """A tiny untrained Keras 3 model saved as `name`."""
    import keras

    layers = [keras.Input(shape)]
    if rescale:
        layers.append(keras.layers.Rescaling(1 / 255.0))
    if len(shape) == 3:
        layers += [keras.layers.Conv2D(4, 3), keras.layers.GlobalAveragePooling2D()]
    layers.append(keras.layers.Dense(outputs, activation="softmax"))
    path = folder / name
    keras.Sequential(layers).save(str(path))
    return path


def _refused(args, run: Path, *expected: str) -> str:
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["import", *map(str, args), "--out", str(run)])
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    assert not run.exists(), "a refused import wrote nothing"
    return lines[0]


def test_a_file_that_is_not_the_format_it_claims(data, tmp_path):
    fake_keras, fake_h5 = tmp_path / "model.keras", tmp_path / "model.h5"
    fake_keras.write_bytes(b"not a zip")
    fake_h5.write_text("plain text")
    empty = tmp_path / "folder"
    empty.mkdir()
    _refused([fake_keras, "--data", data], tmp_path / "r1", "is not a Keras archive", "expected")
    _refused([fake_h5, "--data", data], tmp_path / "r2", "is not an HDF5 file")
    _refused([empty, "--data", data], tmp_path / "r3", "is not a SavedModel folder")
    _refused([tmp_path / "model.pt", "--data", data], tmp_path / "r4", "not found")


def test_a_model_with_no_image_input(data, tmp_path):
    flat = _keras_file(tmp_path, "flat.keras", (10,), rescale=False)
    grey = _keras_file(tmp_path, "grey.keras", (32, 32, 1))
    _refused([flat, "--data", data], tmp_path / "r1", "shape [?, 10]", "expected an image batch of rank 4")
    _refused([grey, "--data", data], tmp_path / "r2", "[?, 32, 32, 1]", "3 channels on neither axis")


def test_a_dynamic_size_needs_image_size(data, tmp_path):
    dynamic = _keras_file(tmp_path, "dynamic.keras", (None, None, 3))
    _refused([dynamic, "--data", data], tmp_path / "r1", "dynamic height or width", "expected --image-size N")


def test_labels_and_data_classes_must_match_the_outputs(data, tmp_path):
    model = _keras_file(tmp_path, "three.keras", (32, 32, 3))
    four = _keras_file(tmp_path, "four.keras", (32, 32, 3), outputs=4)
    two_labels = tmp_path / "two.txt"
    two_labels.write_text("square\nhbar\n")
    other = tmp_path / "other.txt"
    other.write_text("square\nhbar\ncircle\n")
    four_labels = tmp_path / "four.txt"
    four_labels.write_text("square\nhbar\nvbar\ncircle\n")
    _refused([model, "--data", data, "--labels", two_labels], tmp_path / "r1", "names 2 classes", "outputs 3 scores")
    _refused([model, "--data", data, "--labels", four_labels], tmp_path / "r4", "names 4 classes", "outputs 3 scores")
    _refused([four, "--data", data], tmp_path / "r2", "has 3 classes", "outputs 4 scores")
    _refused([model, "--data", data, "--labels", other], tmp_path / "r3", "['vbar']", "not among")


def test_options_that_contradict_the_model(data, tmp_path):
    model = _keras_file(tmp_path, "model.keras", (32, 32, 3))
    _refused([model, "--data", data, "--image-size", "48"], tmp_path / "r1", "--image-size 48 contradicts", "32x32")
    _refused([model, "--data", data, "--input-mean", "127.5", "--input-std", "127.5"], tmp_path / "r2",
             "contradicts", "normalizes its own input")
    _refused([model, "--data", data, "--layout", "nchw"], tmp_path / "r3", "--layout nchw contradicts")
    _refused([model, "--data", data, "--fit", "letterbox"], tmp_path / "r5", "--fit letterbox", "expected --fit stretch")
    unsaid = _keras_file(tmp_path, "unsaid.keras", (32, 32, 3), rescale=False)
    _refused([unsaid, "--data", data], tmp_path / "r4", "does not say how its input is normalized", "--input-mean")


def test_a_tuning_fraction_needs_val_data_and_a_fraction(data, tmp_path):
    """--tuning-fraction sets aside a share of --val-data (the only images the model certainly never trained on)."""
    model = tmp_path / "model.keras"  # never read: the options are refused first
    _refused([model, "--data", data, "--tuning-fraction", "0.3"], tmp_path / "r1", "--tuning-fraction 0.3",
             "expected --val-data SPEC with it")
    _refused([model, "--data", data, "--val-data", data, "--tuning-fraction", "1"], tmp_path / "r2",
             "--tuning-fraction 1.0", "expected a fraction in [0, 1)")
