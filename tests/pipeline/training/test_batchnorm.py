"""BatchNorm statistics that fit the run, and a gate that refuses a model no better than chance.

The cheap tests train MobileNetV2 at 32 px on a few shapes; the photo tests at the end are the
issue's own case (MobileNetV2 0.35 and MobileNetV3 Small at 96 px from scratch on camera-size JPEGs
cut from real photos) and the most expensive trainings of the suite: one module fixture, the
fewest epochs that reach the target with margin.
"""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pipeline.rundir.run import Run
from tests.support.helpers import cli, write_camera_jpegs, write_class_folders

pytestmark = [pytest.mark.host, pytest.mark.slow]


def _pipeline(*args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


# ---------------------------------------------------------------------------------------------
# The statistics: measured on the training data, under the default strategy and MirroredStrategy


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> Path:
    return write_class_folders(tmp_path_factory.mktemp("shapes") / "data", per_class=20)


def _first_batchnorm_input(run: Path):
    """The saved model's first BatchNorm layer, and its input on every training image computed here:
    nothing before it depends on batch statistics, so its population mean and variance are exact."""
    import tf_keras as keras

    from pipeline import data

    model = keras.models.load_model(str(run / "keras_model.keras"))
    base = next(layer for layer in model.layers if isinstance(layer, keras.Model))
    conv = keras.Model(base.inputs, base.get_layer("Conv1").output)
    images, _ = data.load_split(Run.open(run), "train")
    x = conv(model.get_layer("preprocess")(images.astype(np.float32))).numpy().astype(np.float64)
    return base.get_layer("bn_Conv1"), x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))


@pytest.mark.parametrize("replicas", [1, 2])
def test_statistics_are_the_training_data_s_under_each_strategy(shapes, tmp_path, replicas):
    run = tmp_path / "run"
    result = cli(["train", "--data", str(shapes), "--model", "mobilenet_v2", "--alpha", "0.35", "--image-size", "32",
                  "--epochs", "2", "--batch-size", "16", "--out", str(run),
                  *(["--cpu-replicas", str(replicas)] if replicas > 1 else [])], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = _manifest(run)
    assert manifest["training"]["replicas"] == replicas
    record = manifest["training"]["batchnorm"]
    steps = manifest["training"]["steps_per_epoch"]
    assert (record["method"], record["layers"], record["estimates"]) == ("reestimated", 52, 2)
    assert (record["batches"], record["examples"]) == (steps, steps * 16)
    assert record["momentum"] == [0.999]

    bn, mean, var = _first_batchnorm_input(run)
    assert bn.momentum == 0.999  # the saved layer keeps Keras' own configuration
    saved_mean, saved_var = bn.moving_mean.numpy(), bn.moving_variance.numpy()
    std = np.sqrt(var)
    # The estimate ran on shuffled batches of the same images (a repeat may draw a few twice):
    # close to the exact population statistics, channel by channel.
    assert np.all(np.abs(saved_mean - mean) <= 0.1 * std + 1e-4), np.abs(saved_mean - mean) / std
    live = var > 1e-6
    assert np.all(np.abs(saved_var[live] / var[live] - 1) <= 0.2), saved_var[live] / var[live]
    # What Keras' moving averages would hold after these few steps (momentum 0.999 from 0 and 1) fails that check.
    assert not np.all(np.abs(0.0 - mean) <= 0.1 * std + 1e-4) or not np.all(np.abs(1.0 / var[live] - 1) <= 0.2)

    # The per-epoch log tells the truth about the saved model: the last epoch's validation is the held-out result.
    history = json.loads((run / "history.json").read_text())
    assert history[-1]["val_accuracy"] == pytest.approx(manifest["metrics"]["heldout"]["accuracy"], abs=1e-6)
    assert history[-1]["val_loss"] == pytest.approx(manifest["metrics"]["heldout"]["loss"], rel=1e-4)


def test_a_model_without_batchnorm_records_none(exported_run):
    assert _manifest(exported_run)["training"]["batchnorm"] == {"method": "none", "layers": 0}


# ---------------------------------------------------------------------------------------------
# Chance: a model no better than always answering the majority class


@pytest.fixture(scope="module")
def stuck_run(tmp_path_factory, shapes):
    """small_cnn trained on the shapes, held out on 12 identical grey images (6 'square', 3 each of the
    others): whatever it learned, it gives every held-out image the same answer, so it is at chance.
    Exported to int8. Returns (run, what train printed on stderr)."""
    import contextlib
    import io

    from PIL import Image

    from pipeline import export, train

    root = tmp_path_factory.mktemp("stuck")
    grey = np.full((40, 40, 3), 90, np.uint8)
    for name, count in (("hbar", 3), ("square", 6), ("vbar", 3)):
        (root / "val" / name).mkdir(parents=True)
        for i in range(count):
            Image.fromarray(grey).save(root / "val" / name / f"{i}.png")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        run = train.train_model(train.TrainConfig(data=str(shapes), val_data=str(root / "val"), image_size=16, epochs=3,
                                          batch_size=8), root / "run")
    export.export_model(export.ExportConfig(mode=export.Mode.INT8, debug_samples=2), run)
    return run, err.getvalue()


def test_train_says_when_held_out_accuracy_stayed_at_chance(stuck_run):
    run, stderr = stuck_run
    history = json.loads((run / "history.json").read_text())
    assert history[-1]["accuracy"] > history[0]["accuracy"]  # training accuracy rose
    assert "warning: held-out accuracy" in stderr
    assert "is no better than always answering the most frequent held-out class, 0.5000 (6 of 12 images, " \
           "always answering 'square')" in stderr
    assert "BatchNorm statistics" in stderr and "--weights imagenet" in stderr
    assert _manifest(run)["metrics"]["heldout_majority"] == {"class": "square", "label": 1, "correct": 6, "images": 12,
                                                              "rate": 0.5}


def test_parity_refuses_a_model_at_chance_naming_the_majority_rate(stuck_run, tmp_path):
    import shutil

    run = Path(shutil.copytree(stuck_run[0], tmp_path / "run"))
    result = _pipeline("parity", run)
    assert result.exit_code == 1, result.output
    assert "parity gate failed" in result.output
    assert "float_savedmodel: top-1" in result.output
    assert "is no better than always answering the most frequent held-out class, 0.5000 (6 of 12 images, " \
           "always answering 'square')" in result.output
    report = json.loads((run / "parity" / "report.json").read_text())
    assert report["gate"]["passed"] is False and report["gate"]["floor"]["majority"]["correct"] == 6

    # A floor of one's own replaces the majority rule: at 0 this model passes (int8 answers as float does).
    result = _pipeline("parity", run, "--min-accuracy", "0")
    assert result.exit_code == 0, result.output
    assert "top-1 >= 0" in result.output


def test_the_floor_counts_images():
    from pipeline.gate import Floor, Score
    from pipeline.tasks.classify.chance import majority

    chance = majority([0] * 20 + [1] * 20 + [2] * 20 + [3] * 20, ["a", "b", "c", "d"])
    assert (chance.label, chance.count, chance.images) == (0, 20, 80)  # the lowest id among equals
    at_chance, above = Floor(chance, None).failure("m", Score.counted(20, 80)), Floor(chance, None).failure("m", Score.counted(21, 80))
    assert above is None
    assert at_chance == ("m: top-1 0.2500 (20 of 80 images) is no better than always answering the most frequent "
                         "held-out class, 0.2500 (20 of 80 images, always answering 'a')")
    # 64 of 80 is exactly 0.8: at the floor, which allows it (in floats 64/80 >= 0.8 holds, 0.1*3 does not).
    assert Floor(chance, 0.8).failure("m", Score.counted(64, 80)) is None
    assert Floor(chance, 0.8).failure("m", Score.counted(63, 80)) == "m: top-1 0.7875 (63 of 80 images) is under --min-accuracy 0.8"
    assert Floor(chance, 0.3).failure("m", Score.counted(3, 10)) is None and Fraction(3, 10) == Fraction("0.3")


def test_parity_and_run_take_a_floor_of_one_s_own(exported_copy):
    accuracy = _manifest(exported_copy)["metrics"]["heldout"]["accuracy"]
    assert accuracy < 1
    result = _pipeline("parity", exported_copy, "--min-accuracy", "1")
    assert result.exit_code == 1
    assert "float_savedmodel: top-1" in result.output and "is under --min-accuracy 1" in result.output
    result = _pipeline("parity", exported_copy, "--min-accuracy", "1.5")
    assert result.exit_code == 1 and "--min-accuracy 1.5, expected a share between 0 and 1" in result.output
    # `pipeline run` reuses the trained run and applies the same floor.
    result = _pipeline("run", "--out", exported_copy, "--min-accuracy", "1")
    assert result.exit_code == 1
    assert "is under --min-accuracy 1" in result.output


# ---------------------------------------------------------------------------------------------
# The case: from scratch on camera-size JPEGs cut from real photos, as folders and as TFRecords

# Epochs, measured over seeds 1234, 1 and 2 in both data forms (bench/results/batchnorm_seeds.md):
# MobileNetV2 0.35 is at 0.91-0.99 held out at epoch 8, the fewest with margin over 0.80. MobileNetV3
# Small is past 0.80 from epoch 3, but its folder and TFRecord runs, which see the examples in
# another order, agree within 2 images from epoch 11 on (epoch 12: 1, 1, 1 images apart; 15: 1, 1, 0) and not
# at epoch 10 (0, 4, 4) or 8 (0, 1, 4): 12 is the fewest with an epoch's margin.
PHOTO_RUNS = {"mobilenet_v2": ((("alpha", 0.35),), 8), "mobilenet_v3_small": ((), 12)}
# 100 held-out images, so one image is exactly the default gate's 1 pp: with 80, one image of int8 rounding
# noise (1.25 pp) already failed it (measured once for MobileNetV2 with Coral's input grid).
HELDOUT_PER_CLASS = 25


@pytest.fixture(scope="module")
def photo_runs(tmp_path_factory):
    """4 classes of 640x480 JPEGs (which half of which photo), 240 to train on and 100 held out, as
    folders and as `pipeline prepare` TFRecords; each model trained from scratch on the folders,
    exported to int8 and compared by `pipeline parity` with the default gate; MobileNetV3 Small
    trained on the TFRecords too. Returns {name: (run, parity exit code, seconds)}."""
    import time

    from pipeline import export, prepare, train

    root = tmp_path_factory.mktemp("photos")
    folders = {"train": write_camera_jpegs(root / "train", per_class=60, seed=0, halves=True),
               "val": write_camera_jpegs(root / "val", per_class=HELDOUT_PER_CLASS, seed=1, halves=True)}
    records = {}
    for split, folder in folders.items():
        prepare.write_shards(prepare.PrepareConfig(), str(folder), str(root / f"{split}_tfrec"))
        records[split] = str(root / f"{split}_tfrec" / "*.tfrec")

    def trained(name, data, out):
        options, epochs = PHOTO_RUNS[name]
        # No tuning split: these runs test BatchNorm's statistics and the TFRecord form on all 240 training images.
        # With the default 10% set aside, MobileNetV2 from scratch ends at agreement 0.97 and fails the default gate
        # (the split's cost on a small data set: bench/results/tuning_split.md).
        return train.train_model(train.TrainConfig(data=str(data["train"]), val_data=str(data["val"]), model=name, image_size=96,
                                           model_options=options, epochs=epochs, tuning_fraction=0.0), root / out)

    runs = {}
    for name in PHOTO_RUNS:
        start = time.perf_counter()
        run = trained(name, folders, name)
        export.export_model(export.ExportConfig(mode=export.Mode.INT8, layer_errors=False), run)  # no test reads them
        runs[name] = (run, _pipeline("parity", run), time.perf_counter() - start)
    start = time.perf_counter()
    runs["tfrecords"] = (trained("mobilenet_v3_small", records, "tfrecords"), None, time.perf_counter() - start)
    for name, (_, _, seconds) in runs.items():
        print(f"photo run {name}: {seconds:.0f} s")
    return runs


@pytest.mark.parametrize("name", list(PHOTO_RUNS))
def test_from_scratch_on_photos_learns_and_passes_the_gate(photo_runs, name):
    run, parity, _ = photo_runs[name]
    manifest = _manifest(run)
    assert manifest["training"]["batchnorm"]["method"] == "reestimated"
    assert manifest["metrics"]["heldout"]["accuracy"] >= 0.80, json.loads((run / "history.json").read_text())
    assert parity.exit_code == 0, parity.output
    report = json.loads((run / "parity" / "report.json").read_text())
    # The saved model answers as train measured it: the SavedModel that export calibrated on, through the
    # pixel contract, within an image of train's own held-out count (decoders differ by < 0.2 grey levels).
    heldout = manifest["metrics"]["heldout"]["accuracy"] * 4 * HELDOUT_PER_CLASS
    assert abs(report["models"]["float_savedmodel"]["correct"] - heldout) <= 1
    assert report["models"]["int8_cpu"]["top1"] >= 0.80


@pytest.mark.parametrize("name", list(PHOTO_RUNS))
def test_the_photo_runs_int8_models_are_predicted_fully_mapped(photo_runs, name, tmp_path):
    """MobileNetV2 0.35 and MobileNetV3 Small as `pipeline export --int8` wrote them map fully: the registry's check of
    every built-in model (tests/pipeline/test_compile.py) reads these runs instead of training both again."""
    import shutil

    from tests.pipeline.test_compile import assert_fully_mapped

    run = Path(shutil.copytree(photo_runs[name][0], tmp_path / "run"))  # compile records its report in the run
    assert _manifest(run)["model"]["name"] == name
    assert_fully_mapped(run)


def test_the_keras_model_qat_loads_carries_the_saved_statistics(photo_runs):
    """QAT starts from keras_model.keras, export's calibration from the SavedModel: both hold the
    re-estimated statistics, and the Keras model scores what train recorded."""
    import tensorflow as tf
    import tf_keras as keras

    from pipeline import data
    from pipeline.training import batchnorm

    run = photo_runs["mobilenet_v3_small"][0]
    model = keras.models.load_model(str(run / "keras_model.keras"), compile=False)
    loaded = tf.saved_model.load(str(run / "saved_model"))  # kept: the signature's variables belong to it
    saved = {v.name: v.numpy() for v in loaded.signatures["serving_default"].variables if "moving_" in v.name}
    for layer in batchnorm.layers(model):
        for var in (layer.moving_mean, layer.moving_variance):
            np.testing.assert_array_equal(var.numpy(), saved[var.name])
    images, labels = data.load_split(Run.open(run), "heldout")
    correct = int((model.predict(images.astype(np.float32), verbose=0).argmax(axis=1) == labels).sum())
    assert correct == round(_manifest(run)["metrics"]["heldout"]["accuracy"] * len(labels))


def test_the_tfrecord_form_gives_the_same_held_out_accuracy(photo_runs):
    folder, records = (_manifest(photo_runs[k][0]) for k in ("mobilenet_v3_small", "tfrecords"))
    assert records["data"]["train"]["kind"] == "tfrecord"
    # The same examples (ids, labels, bytes); the training listing is in each form's own order.
    assert sorted(records["data"]["identity"]["heldout"]["examples"]) == sorted(folder["data"]["identity"]["heldout"]["examples"])
    assert records["data"]["identity"]["train"]["per_class"] == folder["data"]["identity"]["train"]["per_class"] == [60] * 4
    assert abs(records["metrics"]["heldout"]["accuracy"] - folder["metrics"]["heldout"]["accuracy"]) * 80 <= 2 + 1e-9
