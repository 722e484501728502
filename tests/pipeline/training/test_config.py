"""`pipeline train`'s options, each declared once on TrainConfig: what the command line parses into the config, and
which options a resumed run must keep (no training here: parsing and checking only)."""
from __future__ import annotations

import json

import pytest

from pipeline import cli
from pipeline.errors import ConfigError
from pipeline.training.config import RESUME_KEYS, TrainConfig, config_from_file, config_from_flags


def _parsed(*args: str) -> TrainConfig:
    params = cli.main.commands["train"].make_context("train", ["--out", "RUN", *args]).params
    assert params.pop("run_dir") == "RUN"
    return config_from_flags(params, params.pop("config_file"))


def test_options_not_given_leave_the_defaults():
    assert _parsed("--data", "digits") == TrainConfig(data="digits")


def test_each_option_reaches_its_field():
    config = _parsed("--data", "digits", "--task", "detect", "--val-data", "v", "--images", "b", "--images", "a", "--model", "mobilenet_v2", "--image-size", "96",
                     "--alpha", "0.35", "--weights", "imagenet", "--epochs", "4", "--frozen-epochs", "2",
                     "--unfreeze-from", "block_9", "--fine-tune-learning-rate", "2e-5", "--batch-size", "16",
                     "--learning-rate", "0.01", "--lr-start", "0.001", "--lr-min", "0.0001", "--warmup-epochs", "2",
                     "--sustain-epochs", "0", "--lr-decay", "0.5", "--cache-mb", "0", "--steps-per-execution", "4",
                     "--tpu", "local", "--cpu-replicas", "2", "--seed", "7", "--resume", "--no-tensorboard", "--client-fits")
    assert (config.task, config.data, config.val_data, config.model, config.image_size) == ("detect", "digits", "v", "mobilenet_v2", 96)
    assert config.images == ("b", "a")  # repeated, kept in the order given
    assert config.model_options == (("alpha", 0.35),) and config.weights == "imagenet"
    assert (config.epochs, config.frozen_epochs, config.unfreeze_from, config.fine_tune_learning_rate) == (4, 2, "block_9", 2e-5)
    assert (config.batch_size, config.cache_mb, config.steps_per_execution, config.tpu, config.cpu_replicas, config.seed) == \
        (16, 0, 4, "local", 2, 7)
    assert config.schedule.as_dict() == {"start": 0.001, "max": 0.01, "min": 0.0001, "warmup_epochs": 2, "sustain_epochs": 0,
                                         "decay": 0.5}
    assert (config.resume, config.tensorboard, config.client_fits) == (True, False, True)


def test_options_go_on_top_of_a_config_file(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": "digits", "epochs": 3, "model_options": {"beta": 1.0}, "schedule": {"max": 0.02}}))
    config = _parsed("--config", str(path), "--epochs", "5", "--alpha", "0.5", "--lr-min", "0.001")
    assert config.epochs == 5 and dict(config.model_options) == {"alpha": 0.5, "beta": 1.0}
    assert (config.schedule.max, config.schedule.min) == (0.02, 0.001)


@pytest.mark.parametrize("key, value, expected", [("epochs", "ten", "a whole number"), ("heldout_fraction", "half", "a number"),
                                                  ("resume", 1, "true or false"), ("val_data", 3, "a string")])
def test_a_config_file_value_of_the_wrong_type_is_named(tmp_path, key, value, expected):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": "digits", key: value}))
    with pytest.raises(ConfigError, match=f"{key} {value!r}, expected {expected}"):
        config_from_file(path, {}).validate()


def test_resume_keys_are_the_options_that_change_the_model_or_the_data():
    assert {"data", "val_data", "images", "model", "image_size", "model_options", "weights", "batch_size", "seed", "task"} <= set(RESUME_KEYS)
    assert not {"epochs", "resume", "tensorboard", "tpu", "cpu_replicas", "cache_mb", "steps_per_execution"} & set(RESUME_KEYS)
