"""`pipeline train`: accuracy on digits, every strategy we can run here, TFRecords, resume, bad input."""
from __future__ import annotations

import json
import os

import pytest

from tests.support.helpers import (
    cli,
    free_port,
    kill_after_first_epoch,
    quiet_env,
    start_worker,
    tensorboard_scalars,
    write_class_folders,
    write_kaggle_tfrecords,
)
from tests.support.readme_run import readme_run_once

pytestmark = pytest.mark.host

FAST = ["--epochs", "2", "--image-size", "16"]


@pytest.fixture(scope="module")
def digits_run(session_folder):
    """The default training on digits, as the README's main command does it: that command's own run, built once
    per session (tests/support/readme_run.py) and read only here."""
    return readme_run_once(session_folder).run


def test_digits_reaches_stated_accuracy(digits_run):
    manifest = json.loads((digits_run / "manifest.json").read_text())
    # Stated target: the README's command 1 prints a float top-1 of at least 0.98 on digits (small_cnn with its flatten
    # head, `pipeline run`'s recipe for its built-in data, 10 epochs). It gives 0.9818 (0.9401 with the averaging
    # head the recipe replaced; seeds 1 and 7, on their own held-out splits: 0.9894 and 0.9883;
    # bench/results/digits_demo.md).
    assert manifest["metrics"]["heldout"]["accuracy"] >= 0.98
    assert manifest["model"]["options"] == {"flatten": 1}
    assert manifest["training"]["strategy"] == "default"
    assert len(json.loads((digits_run / "history.json").read_text())) == 10
    split = manifest["data"]["split"]
    assert split["train_examples"] + split["heldout_examples"] + split["tuning_examples"] == 1797
    assert 0.15 < split["heldout_examples"] / 1797 < 0.25


def test_run_directory_matches_its_manifest(digits_run):
    from pipeline.rundir.run import Run

    run = Run.open(digits_run)
    for key in ("saved_model", "keras_model", "labels", "history"):
        assert run.artifact(key).exists()  # checks sha256 too
    assert (digits_run / "labels.txt").read_text().split() == [str(i) for i in range(10)]
    assert not (digits_run / ".train_state").exists()


def test_saved_model_serves_raw_pixels(digits_run):
    import numpy as np
    import tensorflow as tf

    from pipeline import data
    from pipeline.rundir.run import Run

    images, labels = data.load_split(Run.open(digits_run), "heldout")
    serve = tf.saved_model.load(str(digits_run / "saved_model")).signatures["serving_default"]
    scores = list(serve(tf.constant(images[:64], tf.float32)).values())[0].numpy()
    assert scores.shape == (64, 10)
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-4)
    assert (scores.argmax(axis=1) == labels[:64]).mean() >= 0.85


def test_saved_model_signature_is_the_one_keras_writes_by_default(digits_run, tmp_path):
    """train saves the SavedModel without the layers' traces but with Keras' own default serving signature: the
    same inputs, outputs and scores as a default save of the same model."""
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    model = keras.models.load_model(str(digits_run / "keras_model.keras"), compile=False)
    model.save(str(tmp_path / "default"), save_format="tf")
    ours = tf.saved_model.load(str(digits_run / "saved_model")).signatures["serving_default"]
    default = tf.saved_model.load(str(tmp_path / "default")).signatures["serving_default"]
    assert ours.structured_input_signature == default.structured_input_signature
    assert ours.structured_outputs == default.structured_outputs
    x = tf.random.stateless_uniform([3, *ours.structured_input_signature[1]["image"].shape[1:]], [1, 2], 0, 255)
    np.testing.assert_allclose(ours(image=x)["scores"].numpy(), default(image=x)["scores"].numpy(), atol=1e-6)
    # It still loads as a Keras model (from the layers' configs).
    reloaded = keras.models.load_model(str(digits_run / "saved_model"), compile=False)
    np.testing.assert_allclose(reloaded(x, training=False).numpy(), default(image=x)["scores"].numpy(), atol=1e-6)


def test_the_training_step_is_traced_once(tmp_path, monkeypatch):
    """Keras traces a training step that makes variables twice; the accuracy metric, made from its name in the first
    step, did (2.3-2.5 s of a MobileNetV2 run at 96 px)."""
    from pipeline import train
    from pipeline.training import fit

    traced = []
    real = fit.fit

    def fit_and_count(*args, **kwargs):
        model, *rest = real(*args, **kwargs)
        traced.append(model.train_function.experimental_get_tracing_count())
        return (model, *rest)

    monkeypatch.setattr(fit, "fit", fit_and_count)
    data = write_kaggle_tfrecords(tmp_path / "rec", per_class=10, files=2)
    train.train_model(train.TrainConfig(data=data, image_size=16, epochs=2, batch_size=8), tmp_path / "run")
    assert traced == [1]


def test_split_is_the_same_in_later_stages(digits_run):
    from pipeline import data
    from pipeline.rundir import manifest as manifest_mod
    from pipeline.rundir.run import Run

    manifest = manifest_mod.load(digits_run)
    first = data.load_split(Run.open(digits_run), "heldout")
    again = data.load_split(Run.open(digits_run), "heldout")
    assert len(first[0]) == manifest["data"]["split"]["heldout_examples"]
    assert (first[0] == again[0]).all() and (first[1] == again[1]).all()


@pytest.mark.slow  # trains under MirroredStrategy in a process of its own
def test_mirrored_strategy_two_cpu_devices_with_steps_per_execution(tmp_path):
    run_dir = tmp_path / "mirrored"
    result = cli(["train", "--data", "digits", "--out", str(run_dir), "--cpu-replicas", "2",
                  "--steps-per-execution", "4", *FAST])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "MirroredStrategy over 2 logical CPU devices" in result.stdout
    training = json.loads((run_dir / "manifest.json").read_text())["training"]
    assert (training["strategy"], training["replicas"], training["steps_per_execution"]) == ("mirrored", 2, 4)
    assert training["per_replica_batch"] == 16
    assert (run_dir / "saved_model" / "saved_model.pb").exists()


@pytest.mark.slow  # two training processes of its own
def test_multi_worker_mirrored_two_processes(tmp_path):
    ports = [free_port(), free_port()]
    workers = [f"127.0.0.1:{p}" for p in ports]
    procs = [start_worker(i, workers, ["train", "--data", "digits", "--out", str(tmp_path / f"w{i}"), *FAST]) for i in range(2)]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=240))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-2000:]
    manifest = json.loads((tmp_path / "w0" / "manifest.json").read_text())
    assert manifest["training"]["strategy"] == "multi_worker_mirrored"
    assert manifest["training"]["replicas"] == 2
    assert not (tmp_path / "w1").exists()  # only the chief writes a run, TensorBoard's event files included
    assert sorted(tensorboard_scalars(tmp_path / "w0" / "logs" / "train")["epoch_loss"]) == [0, 1]


def test_kaggle_tfrecords_train_end_to_end(tmp_path):
    from pipeline import train

    pattern = write_kaggle_tfrecords(tmp_path / "tfrec")
    run_dir = train.train_model(train.TrainConfig(data=pattern, image_size=24, epochs=4, batch_size=16), tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["data"]["train"]["kind"] == "tfrecord"
    assert manifest["data"]["train"]["num_examples"] == 120
    assert manifest["labels"] == ["0", "1", "2"]
    assert manifest["metrics"]["heldout"]["accuracy"] >= 0.8  # three easy shapes


def test_class_folders_with_separate_validation_data(tmp_path):
    from pipeline import train

    root = write_class_folders(tmp_path / "train")
    val = write_class_folders(tmp_path / "val", per_class=5)
    run_dir = train.train_model(train.TrainConfig(data=str(root), val_data=str(val), image_size=24, epochs=2, batch_size=16),
                        tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["labels"] == ["hbar", "square", "vbar"]
    assert manifest["data"]["split"]["heldout_examples"] == 15


@pytest.mark.slow  # trains, is killed and trains again
def test_interrupted_run_resumes_and_keeps_history(tmp_path):
    run_dir = tmp_path / "run"
    kill_after_first_epoch(["train", "--data", "digits", "--out", str(run_dir), "--epochs", "3", "--image-size", "16"], 3)
    first = json.loads((run_dir / ".train_state" / "history.json").read_text())
    assert [e["epoch"] for e in first] == [1]
    assert not (run_dir / "manifest.json").exists()

    result = cli(["train", "--data", "digits", "--out", str(run_dir), "--epochs", "3", "--image-size", "16"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resuming from epoch 1 of 3" in result.stdout
    history = json.loads((run_dir / "history.json").read_text())
    assert [e["epoch"] for e in history] == [1, 2, 3]
    assert history[0] == first[0]
    assert [bool(e.get("resumed")) for e in history] == [False, True, False]
    assert "Resumed after an interruption before epoch 2 " in (run_dir / "report.html").read_text()
    # TensorBoard: the killed process's epoch and the resumed process's two, each once, in two sets of event files.
    scalars = tensorboard_scalars(run_dir / "logs" / "train")
    assert {step: len(values) for step, values in scalars["epoch_loss"].items()} == {0: 1, 1: 1, 2: 1}
    assert scalars["epoch_loss"][0] == pytest.approx([first[0]["loss"]], rel=1e-6)
    assert len(list((run_dir / "logs" / "train").glob("events.out.tfevents.*"))) == 2


def test_resume_refuses_changed_options(tmp_path):
    state = tmp_path / "run" / ".train_state"
    state.mkdir(parents=True)
    (state / "config.json").write_text(json.dumps({"data": "digits", "model": "small_cnn", "image_size": 32}))
    result = cli(["train", "--data", "digits", "--out", str(tmp_path / "run"), *FAST])
    assert result.returncode == 1
    assert "cannot resume" in result.stderr and "image_size" in result.stderr


def test_a_state_saved_before_the_tuning_split_existed_resumes_only_without_one(tmp_path):
    """A run interrupted before training set a tuning split aside trained on every non-held-out image: resuming it
    with the split's default would change its training data mid-run, so it is refused unless the split is 0."""
    from pipeline.errors import ConfigError
    from pipeline.train import _check_resumable
    from pipeline.training.config import TrainConfig

    state = tmp_path / ".train_state"
    state.mkdir()
    saved = TrainConfig(data="digits").as_dict()
    del saved["tuning_fraction"]
    (state / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ConfigError, match="tuning_fraction: saved 0.0, now 0.1"):
        _check_resumable(state, TrainConfig(data="digits"))
    _check_resumable(state, TrainConfig(data="digits", tuning_fraction=0.0))


# --- bad input: a clear message, a non-zero exit, and nothing half-written -------------------


def _train_in_process(args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, ["train", *args])


def _assert_untouched(run_dir, before):
    assert sorted(p.name for p in run_dir.iterdir()) == before if run_dir.exists() else before == []


def test_glob_matching_nothing(tmp_path, existing_run_dir):
    result = _train_in_process(["--data", str(tmp_path / "nothing-*.tfrec"), "--out", str(existing_run_dir)])
    assert result.exit_code == 1
    assert "no TFRecord files match" in result.output
    _assert_untouched(existing_run_dir, ["notes.txt"])


def test_tfrecord_missing_feature(tmp_path):
    pattern = write_kaggle_tfrecords(tmp_path / "tfrec", per_class=2, files=1, drop_feature="class")
    result = _train_in_process(["--data", pattern, "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "has no feature 'class'" in result.output and "record 0" in result.output
    assert not (tmp_path / "run").exists()


def test_corrupt_jpeg(tmp_path, existing_run_dir):
    pattern = write_kaggle_tfrecords(tmp_path / "tfrec", per_class=3, files=1, corrupt_index=4)
    result = _train_in_process(["--data", pattern, "--out", str(existing_run_dir)])
    assert result.exit_code == 1
    assert "record 4" in result.output and "cannot read image" in result.output and "truncated" in result.output.lower()
    _assert_untouched(existing_run_dir, ["notes.txt"])


def test_empty_class_folder(tmp_path):
    root = write_class_folders(tmp_path / "data", per_class=2)
    (root / "empty").mkdir()
    result = _train_in_process(["--data", str(root), "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "holds no images" in result.output and "empty" in result.output
    assert not (tmp_path / "run").exists()


def test_unknown_model(tmp_path):
    result = _train_in_process(["--data", "digits", "--model", "resnet9000", "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "unknown model 'resnet9000'" in result.output and "small_cnn" in result.output
    assert not (tmp_path / "run").exists()


def test_batch_that_does_not_divide_across_replicas(tmp_path):
    result = cli(["train", "--data", "digits", "--out", str(tmp_path / "run"), "--cpu-replicas", "2",
                  "--batch-size", "33", *FAST])
    assert result.returncode == 1
    assert "global batch size 33 does not divide across 2 replicas" in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("tpu", ["grpc://127.0.0.1:{port}", "no-such-tpu"])
def test_unreachable_tpu_is_an_error_not_a_cpu_fallback(tmp_path, tpu):
    result = _train_in_process(["--data", "digits", "--tpu", tpu.format(port=free_port()), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert "cannot reach TPU" in result.output and "Not falling back to the CPU" in result.output
    assert not (tmp_path / "run").exists()


def test_finished_run_is_not_overwritten(digits_run):
    before = (digits_run / "manifest.json").read_bytes()
    result = _train_in_process(["--data", "digits", "--out", str(digits_run)])
    assert result.exit_code == 1 and "already holds a finished run" in result.output
    assert (digits_run / "manifest.json").read_bytes() == before


@pytest.mark.tpu
def test_trains_on_a_real_tpu(tmp_path):
    result = cli(["train", "--data", "digits", "--out", str(tmp_path / "run"), "--epochs", "1"],
                 env=quiet_env(TPU_NAME=os.environ.get("TPU_NAME", "")))
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["training"]["strategy"] == "tpu"


def test_failure_in_the_first_epoch_leaves_an_existing_folder_as_it_was(existing_run_dir, monkeypatch):
    from pipeline import train

    def broken_fit(*args, **kwargs):
        raise RuntimeError("simulated failure inside model.fit")

    monkeypatch.setattr(train.keras.Model, "fit", broken_fit)
    with pytest.raises(RuntimeError, match="simulated failure"):
        train.train_model(train.TrainConfig(data="digits", image_size=16, epochs=1), existing_run_dir)
    _assert_untouched(existing_run_dir, [".lock", "notes.txt"])  # the lock file is never removed (rundir/lock.py)
