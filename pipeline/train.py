"""`pipeline train`: train a registry model under the chosen tf.distribute strategy and save it.

    pipeline train --data digits --out runs/digits

Writes RUN/saved_model (serving signature), RUN/keras_model.keras, labels.txt, history.json and
manifest.json. While training, RUN/.train_state holds a checkpoint per epoch and the history so
far; an interrupted run continues from its last completed epoch when started again.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras = tf-keras (Keras 2): see models/registry.py

import json
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_keras as keras

import models
from edge import preprocess
from pipeline import data as data_mod
from pipeline.rundir import manifest as manifest_mod
from pipeline.training import batchnorm, chance
from pipeline.training import strategy as strategy_mod
from pipeline.training import transfer
from pipeline.errors import ConfigError, DataError
from pipeline.rundir.files import staged_path, write_json_atomic, write_text_atomic
from pipeline.training.schedule import WarmupSchedule

STATE_DIR = ".train_state"
# Fields that must match for a run to be resumed: anything that changes the model or the data.
_RESUME_KEYS = ("data", "val_data", "model", "image_size", "model_options", "batch_size", "seed", "heldout_fraction",
                "weights", "frozen_epochs", "unfreeze_from", "fine_tune_learning_rate")
# Kaggle's TPU tutorial runs several steps per host round trip; elsewhere one is as fast.
TPU_STEPS_PER_EXECUTION = 8


@dataclass(frozen=True)
class TrainConfig:
    data: str  # data spec: digits | TFRecord glob | folder of class folders
    val_data: Optional[str] = None  # held-out data spec; None = a seeded split of `data`
    model: str = "small_cnn"  # a name from models.MODEL_NAMES
    image_size: Optional[int] = None  # square input size; None = the model's default
    model_options: Tuple[Tuple[str, float], ...] = ()  # builder options, e.g. (("alpha", 0.35),)
    weights: Optional[str] = None  # 'imagenet' (Keras' loader and cache) or a local weights file
    frozen_epochs: int = 0  # first epochs train only the head on the frozen pretrained base (pipeline/training/transfer.py)
    unfreeze_from: Optional[str] = None  # after them, unfreeze the base from this layer on; None = all of it
    cache_mb: int = data_mod.DEFAULT_CACHE_MB  # memory budget for keeping the decoded training set after epoch 1
    fine_tune_learning_rate: float = 1e-5  # after them, a constant low rate, as Keras' transfer-learning guide uses
    epochs: int = 10  # total epochs, resumed runs included
    batch_size: int = 32  # global batch, split evenly across replicas
    schedule: WarmupSchedule = field(default_factory=WarmupSchedule)  # learning rate per epoch
    steps_per_execution: Optional[int] = None  # None = 8 on TPU, 1 elsewhere
    tpu: Optional[str] = None  # TPU name, 'local' or grpc://host:port; None = TPU_NAME or no TPU
    cpu_replicas: int = 1  # >1: MirroredStrategy over logical CPU devices (testing distribution)
    seed: int = 1234  # seeds weights, shuffling and the held-out split
    heldout_fraction: float = 0.2  # share held out when no val_data is given
    resume: bool = False  # insist on resuming (a run with saved state resumes anyway)

    def validate(self) -> "TrainConfig":
        for name, kind in _FIELD_TYPES.items():
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) != (kind is bool) or not isinstance(value, kind)):
                raise ConfigError(f"{name} {value!r}, expected {_KIND_NAMES[kind]}")
        if self.model not in models.MODEL_NAMES:
            raise ConfigError(f"unknown model {self.model!r}; expected one of {', '.join(models.MODEL_NAMES)}")
        size = self.image_size or models.default_image_size(self.model)
        if size < models.min_image_size(self.model):
            raise ConfigError(f"image size {size} is too small for {self.model}; expected at least {models.min_image_size(self.model)}")
        for name in ("epochs", "batch_size", "cpu_replicas"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} {getattr(self, name)}, expected at least 1")
        if self.steps_per_execution is not None and self.steps_per_execution < 1:
            raise ConfigError(f"steps_per_execution {self.steps_per_execution}, expected at least 1")
        if not 0 <= self.frozen_epochs <= self.epochs:
            raise ConfigError(f"frozen_epochs {self.frozen_epochs}, expected 0..epochs ({self.epochs})")
        if (self.frozen_epochs or self.unfreeze_from) and not self.weights:
            raise ConfigError("--frozen-epochs and --unfreeze-from fine-tune pretrained weights; give --weights "
                              "(imagenet or a local file)")
        if self.unfreeze_from and not self.frozen_epochs:
            raise ConfigError("--unfreeze-from says where to unfreeze after the frozen epochs; give --frozen-epochs N too")
        if self.frozen_epochs and not models.has_base(self.model):
            raise ConfigError(f"{self.model} has no pretrained base network to freeze; expected one of "
                              f"{', '.join(n for n in models.MODEL_NAMES if models.has_base(n))}")
        if self.cache_mb < 0:
            raise ConfigError(f"cache_mb {self.cache_mb}, expected a size in MB, 0 or more (0: never cache)")
        if not self.fine_tune_learning_rate > 0:
            raise ConfigError(f"fine_tune_learning_rate {self.fine_tune_learning_rate}, expected a positive rate")
        if not 0 < self.heldout_fraction < 1:
            raise ConfigError(f"heldout_fraction {self.heldout_fraction}, expected a fraction in (0, 1)")
        try:
            models.check_options(self.model, dict(self.model_options))
            if self.weights and self.weights != models.IMAGENET:
                models.check_weights_file(self.weights)
        except (ValueError, OSError) as err:
            raise ConfigError(str(err)) from err
        return self

    @property
    def size(self) -> int:
        return self.image_size or models.default_image_size(self.model)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["model_options"] = dict(self.model_options)
        d["image_size"] = self.size
        return d


# What each field must hold: a config file can put any JSON value anywhere ("epochs": "ten").
_FIELD_TYPES = {"data": str, "val_data": str, "model": str, "image_size": int, "weights": str, "epochs": int,
                "batch_size": int, "steps_per_execution": int, "tpu": str, "cpu_replicas": int, "seed": int,
                "heldout_fraction": (int, float), "resume": bool, "frozen_epochs": int, "unfreeze_from": str,
                "fine_tune_learning_rate": (int, float), "cache_mb": int}
_KIND_NAMES = {str: "a string", int: "a whole number", (int, float): "a number", bool: "true or false"}


def config_from_file(path: Path, overrides: Dict) -> TrainConfig:
    """A TrainConfig from a JSON file of TrainConfig fields, with command-line values on top."""
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read config {path}: {err}; expected a JSON object of train options") from err
    if not isinstance(values, dict):
        raise ConfigError(f"config {path} holds a JSON {type(values).__name__}; expected a JSON object of train options")
    known = {f.name for f in fields(TrainConfig)}
    unknown = set(values) - known
    if unknown:
        raise ConfigError(f"config {path} has unknown keys {sorted(unknown)}; expected some of {sorted(known)}")
    for key in ("schedule", "model_options"):
        if key in values and not isinstance(values[key], dict):
            raise ConfigError(f"config {path}: {key!r} is {values[key]!r}; expected a JSON object")
    if "schedule" in values:
        known_schedule = {f.name for f in fields(WarmupSchedule)}
        if set(values["schedule"]) - known_schedule:
            raise ConfigError(f"config {path}: schedule has unknown keys {sorted(set(values['schedule']) - known_schedule)}; "
                              f"expected some of {sorted(known_schedule)}")
        values["schedule"] = WarmupSchedule(**values["schedule"])
    overrides = {k: v for k, v in overrides.items() if v is not None}
    # --alpha adds to the file's model options rather than replacing all of them.
    options = {**values.get("model_options", {}), **dict(overrides.pop("model_options", ()))}
    if options:
        values["model_options"] = tuple(sorted(options.items()))
    values.update(overrides)
    if "data" not in values:
        raise ConfigError(f"no data spec: give --data or a 'data' key in {path}")
    return TrainConfig(**values)


# ---------------------------------------------------------------------------------------------


def run(config: TrainConfig, run_dir: Path) -> Path:
    """Train, evaluate on the held-out data, and write the run directory. Returns run_dir."""
    config.validate()
    run_dir = Path(run_dir)
    if (run_dir / manifest_mod.MANIFEST_NAME).exists():
        raise ConfigError(f"{run_dir} already holds a finished run; choose another --out or remove it")
    state_dir = run_dir / STATE_DIR
    resuming = (state_dir / "config.json").is_file()
    if config.resume and not resuming:
        raise ConfigError(f"--resume given but {state_dir} holds no interrupted run to resume")

    chosen = strategy_mod.choose(config.tpu, config.cpu_replicas)  # before any TF op: logical devices
    print(f"strategy: {chosen.description}", flush=True)
    if config.batch_size % chosen.replicas:
        raise ConfigError(
            f"global batch size {config.batch_size} does not divide across {chosen.replicas} replicas; "
            f"expected a multiple of {chosen.replicas}"
        )

    train_source = data_mod.open_source(config.data)
    # Held-out classes are numbered by the training data's class names.
    val_source = data_mod.open_source(config.val_data, train_source.labels) if config.val_data else None
    split = data_mod.Split(config.heldout_fraction, config.seed)
    if val_source:
        train_indices = train_source.indices("all")
        heldout_ds, heldout_count = val_source.dataset(config.size), val_source.num_examples
    else:
        train_indices = train_source.indices("train", split)
        heldout_ds, heldout_count = train_source.dataset(config.size, "heldout", split), train_source.count("heldout", split)
    train_ds, train_count = train_source.training_dataset(config.size, train_indices), len(train_indices)
    decoded = data_mod.decoded_mb(train_count, config.size)
    feed = {"decoded_mb": round(decoded, 1), "cache_mb": config.cache_mb, "cached": 0 < config.cache_mb and decoded <= config.cache_mb}
    steps_per_epoch = train_count // config.batch_size
    if steps_per_epoch < 1:
        raise DataError(f"the training split has {train_count} examples, fewer than one global batch of {config.batch_size}")

    created = not run_dir.exists()
    if chosen.is_chief:
        state_dir.mkdir(parents=True, exist_ok=True)
    try:
        if resuming:
            _check_resumable(state_dir, config)
        elif chosen.is_chief:
            write_json_atomic(state_dir / "config.json", config.as_dict())
        with strategy_mod.peer_failures_explained(chosen, run_dir):
            model, history, weights, bn_record = _fit(config, chosen, len(train_source.labels), train_ds, feed["cached"], heldout_ds, steps_per_epoch,
                                  _eval_steps(heldout_count, config.batch_size), state_dir)
    except BaseException:
        # Nothing of a run that never completed an epoch is kept (and a folder the user already had
        # is left as it was); a run that completed one keeps its state to resume from.
        if not chosen.is_chief:
            # A worker's RUN may be the chief's (shared storage): it removes only what it left empty.
            for path in (state_dir / "backup", state_dir / "backup_frozen", state_dir) + ((run_dir,) if created else ()):
                _remove_if_empty(path)
        elif not (state_dir / "history.json").exists():
            shutil.rmtree(run_dir if created else state_dir, ignore_errors=True)
        raise

    with strategy_mod.peer_failures_explained(chosen, run_dir):  # evaluating and saving run collectives too
        metrics = _evaluate(model, heldout_ds, config.batch_size, _eval_steps(heldout_count, config.batch_size))
    print(f"held-out: accuracy {metrics['accuracy']:.4f}, loss {metrics['loss']:.4f} ({heldout_count} examples)", flush=True)
    majority = chance.heldout_majority(train_source, val_source, split)
    chance.warn_if_stuck(history, metrics["accuracy"], majority, pretrained=config.weights is not None)
    if not chosen.is_chief:
        # Every worker must take part in every save (collectives); only the chief's copy is kept.
        with tempfile.TemporaryDirectory() as scratch, strategy_mod.peer_failures_explained(chosen, run_dir):
            _save_models(model, Path(scratch) / "saved_model", Path(scratch) / "keras_model.keras")
        for path in (state_dir / "backup", state_dir / "backup_frozen", state_dir) + ((run_dir,) if created else ()):
            _remove_if_empty(path)  # BackupAndRestore leaves its empty folder behind
        print("this worker is done; the chief writes the run directory", flush=True)
        return run_dir
    record = {
        "model": {
            "name": config.model,
            "image_size": config.size,
            "num_classes": len(train_source.labels),
            "options": dict(config.model_options),
            "parameters": int(model.count_params()),
            "weights": weights,  # starting weights: source (imagenet | file), path, url, sha256; None = random
            "in_model_preprocessing": "Rescaling(1/127.5, offset=-1): the model takes raw RGB pixels 0..255",
        },
        # How an image becomes the model's input, for every later stage and the device.
        "preprocessing": preprocess.contract(preprocess.RAW_PIXELS),
        "labels": train_source.labels,
        "data": {
            "train": train_source.describe(),
            "val": val_source.describe() if val_source else None,
            "split": {**asdict(split), "train_examples": train_count, "heldout_examples": heldout_count,
                      "method": "seeded hash of each example's identity" if not val_source else "separate --val-data"},
            "identity": data_mod.identity_record(train_source, val_source, split),
        },
        "training": {
            "strategy": chosen.kind,
            "strategy_description": chosen.description,
            "replicas": chosen.replicas,
            "global_batch": config.batch_size,
            "per_replica_batch": config.batch_size // chosen.replicas,
            "steps_per_epoch": steps_per_epoch,
            "feed": feed,  # decoded training set cached in memory when it fits cache_mb, else read every epoch
            "batchnorm": bn_record,  # how the saved BatchNorm statistics were obtained (pipeline/training/batchnorm.py)
            "steps_per_execution": _steps_per_execution(config, chosen),
            "epochs": config.epochs,
            "mixed_precision": keras.mixed_precision.global_policy().name,
            "schedule": config.schedule.as_dict(),
            "seed": config.seed,
            "config": config.as_dict(),
        },
        "metrics": {"heldout": metrics, "heldout_majority": majority.as_dict(), "final_epoch": history[-1] if history else {}},
        "versions": _versions(),
    }
    with strategy_mod.peer_failures_explained(chosen, run_dir):  # the chief's saves wait on the other workers
        _write_run(run_dir, model, train_source.labels, history, record)
    shutil.rmtree(state_dir, ignore_errors=True)
    return run_dir


def _steps_per_execution(config: TrainConfig, chosen: strategy_mod.Chosen) -> int:
    if config.steps_per_execution is not None:
        return config.steps_per_execution
    return TPU_STEPS_PER_EXECUTION if chosen.is_tpu else 1


def _check_resumable(state_dir: Path, config: TrainConfig) -> None:
    saved = json.loads((state_dir / "config.json").read_text())
    now = config.as_dict()
    # A key the saved state lacks was added since it was written: it held the default then.
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    saved = {k: saved.get(k, defaults.get(k)) for k in _RESUME_KEYS}
    changed = [k for k in _RESUME_KEYS if saved[k] != now.get(k)]
    if changed:
        diffs = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in changed)
        raise ConfigError(f"cannot resume the run in {state_dir.parent}: options changed ({diffs})")
    done = len(json.loads((state_dir / "history.json").read_text())) if (state_dir / "history.json").exists() else 0
    print(f"resuming from epoch {done} of {config.epochs}", flush=True)


def _fit(config, chosen, num_classes, train_ds, cache: bool, heldout_ds, steps_per_epoch, validation_steps, state_dir: Path):
    keras.utils.set_random_seed(config.seed)
    if chosen.is_tpu:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    with chosen.strategy.scope():
        try:
            built = models.build_recorded(config.model, num_classes, config.size,
                                          weights=config.weights, **dict(config.model_options))
            model = built.model
        except ValueError as err:  # weights that do not fit the model; options were checked in validate()
            raise ConfigError(str(err)) from err
        if config.unfreeze_from:
            transfer.check_layer(built.base, config.unfreeze_from)
        _compile(model, config, chosen)
    train = data_mod.training_pipeline(train_ds, config.batch_size, config.seed, cache=cache)
    val = data_mod.eval_pipeline(heldout_ds, config.batch_size)
    statistics = batchnorm.Statistics(model, chosen.strategy, config.weights, steps_per_epoch=steps_per_epoch,
                                      # a shuffle of its own; not cached: a second cache would hold a second copy
                                      batches=lambda: data_mod.training_pipeline(train_ds, config.batch_size, config.seed + 1),
                                      global_batch=config.batch_size)
    epoch_log = EpochLog(state_dir / "history.json", config.epochs, write=chosen.is_chief)
    on_terminal = sys.stdout.isatty()
    for phase in transfer.phases(config.epochs, config.frozen_epochs):
        if phase.name == "frozen":
            transfer.freeze(built.base)
        elif phase.name == "fine_tune":
            transfer.unfreeze(built.base, config.unfreeze_from)
            print(f"epoch {phase.first_epoch + 1}: base unfrozen "
                  f"{'from ' + config.unfreeze_from if config.unfreeze_from else 'whole'} (BatchNorm stays in inference mode), "
                  f"learning rate {config.fine_tune_learning_rate:g}", flush=True)
        if phase.name != "all":
            with chosen.strategy.scope():  # trainable changes take effect when the model is compiled again
                _compile(model, config, chosen, config.fine_tune_learning_rate if phase.name == "fine_tune" else None)
        callbacks = [
            *statistics.callbacks,  # before the checkpoint: each epoch's holds the statistics its validation used
            # Before the log, so an epoch's checkpoint is on disk before its line is printed. The frozen phase
            # keeps its last checkpoint: a run resumed after the switch gets the head it trained.
            keras.callbacks.BackupAndRestore(str(state_dir / phase.backup), delete_checkpoint=phase.name != "frozen"),
            *([] if phase.name == "fine_tune" else [keras.callbacks.LearningRateScheduler(config.schedule)]),
            epoch_log,
        ]
        try:
            model.fit(train, initial_epoch=phase.first_epoch, epochs=phase.end_epoch, steps_per_epoch=steps_per_epoch,
                      validation_data=val, validation_steps=validation_steps,
                      callbacks=callbacks, verbose=1 if on_terminal else 0)
        except tf.errors.InvalidArgumentError as err:
            raise DataError(f"the input pipeline failed during training: {err.message.splitlines()[0][:300]}") from err
    return model, epoch_log.history(), built.weights, statistics.record()


def _compile(model, config, chosen, learning_rate: Optional[float] = None) -> None:
    """A fresh Adam at `learning_rate` (None: the schedule's start, which the scheduler then sets)."""
    model.compile(
        optimizer=keras.optimizers.Adam(config.schedule.start if learning_rate is None else learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=["accuracy"],
        steps_per_execution=_steps_per_execution(config, chosen),
    )


class EpochLog(keras.callbacks.Callback):
    """Keeps every epoch's metrics in a JSON file (so a resumed run keeps earlier epochs) and
    prints one line per epoch when the progress bar is off."""

    def __init__(self, path: Path, epochs: int, write: bool):
        super().__init__()
        self.path, self.epochs, self.write = Path(path), epochs, write
        self.entries = json.loads(self.path.read_text()) if self.path.exists() else []
        self.started = time.time()

    def on_epoch_begin(self, epoch, logs=None):
        self.started = time.time()

    def on_epoch_end(self, epoch, logs=None):
        entry = {"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()},
                 "seconds": round(time.time() - self.started, 2)}
        self.entries = [e for e in self.entries if e["epoch"] < epoch + 1] + [entry]
        if self.write:
            write_json_atomic(self.path, self.entries)
        if not sys.stdout.isatty():
            shown = " - ".join(f"{k} {v:.4g}" for k, v in entry.items() if k not in ("epoch", "seconds"))
            print(f"epoch {epoch + 1}/{self.epochs} - {shown} - {entry['seconds']}s", flush=True)

    def history(self):
        return list(self.entries)


def _eval_steps(count: int, batch_size: int) -> int:
    # Keras cannot infer a dataset's length once steps_per_execution > 1.
    return -(-count // batch_size)


def _evaluate(model, heldout_ds, batch_size: int, steps: int) -> Dict[str, float]:
    results = model.evaluate(data_mod.eval_pipeline(heldout_ds, batch_size), steps=steps, verbose=0, return_dict=True)
    return {k: float(v) for k, v in results.items()}


def _write_run(run_dir: Path, model, labels, history, record) -> None:
    """Each artifact atomically, then the manifest that records them last."""
    manifest = manifest_mod.new(**record)
    with staged_path(run_dir / "saved_model") as saved_model, staged_path(run_dir / "keras_model.keras") as keras_file:
        _save_models(model, saved_model, keras_file)
    write_text_atomic(run_dir / "labels.txt", "\n".join(labels) + "\n")
    write_json_atomic(run_dir / "history.json", history)
    for key, name in (("saved_model", "saved_model"), ("keras_model", "keras_model.keras"),
                      ("labels", "labels.txt"), ("history", "history.json")):
        manifest_mod.record_artifact(manifest, run_dir, key, run_dir / name)
    manifest["stages"] = {"train": {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
    manifest_mod.save(run_dir, manifest)


def _save_models(model, saved_model: Path, keras_file: Path) -> None:
    model.save(str(saved_model), save_format="tf")  # includes the serving_default signature
    model.save(str(keras_file))


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _versions() -> Dict[str, str]:
    return {"python": platform.python_version(), "tensorflow": tf.__version__,
            "tf_keras": keras.__version__, "numpy": np.__version__}
