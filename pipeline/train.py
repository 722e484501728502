"""`pipeline train`: train a registry model under the chosen tf.distribute strategy and save it.

    pipeline train --data digits --out runs/digits

Writes RUN/saved_model (serving signature), RUN/keras_model.keras, labels.txt, history.json and
manifest.json. While training, RUN/.train_state holds a checkpoint per epoch and the history so
far; an interrupted run continues from its last completed epoch when started again.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras = tf-keras (Keras 2): see models/registry.py

import contextlib
import json
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Dict, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_keras as keras

import models
from pipeline import data as data_mod
from pipeline.inference import class_metrics
from pipeline.rundir import lock, manifest as manifest_io
from pipeline.report import write as write_report
from pipeline.training import batchnorm, chance
from pipeline.training import strategy as strategy_mod
from pipeline.training import logs as train_logs
from pipeline.training import transfer
from pipeline.errors import ConfigError, DataError
from pipeline.rundir.files import json_bytes, write_json_atomic
from pipeline.rundir.run import Run
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
    tensorboard: bool = True  # TensorBoard event files in RUN/logs (the chief only)

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
        if self.tensorboard:
            train_logs.check_installed()
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
                "fine_tune_learning_rate": (int, float), "cache_mb": int, "tensorboard": bool}
_KIND_NAMES = {str: "a string", int: "a whole number", (int, float): "a number", bool: "true or false"}


def config_from_options(options: Dict, schedule: Dict, config_file: Optional[Path] = None) -> TrainConfig:
    """The TrainConfig the command line asks for: a JSON file's fields (when given) with the options on
    top; `schedule` holds the learning-rate options, merged into the file's schedule. None = not given."""
    schedule = {k: v for k, v in schedule.items() if v is not None}
    try:
        if config_file:
            config = config_from_file(config_file, options)
            if schedule:
                config = replace(config, schedule=WarmupSchedule(**{**config.schedule.as_dict(), **schedule}))
            return config
        if not options.get("data"):
            raise ConfigError("no data spec: give --data (for example --data digits) or --config FILE")
        return TrainConfig(**{k: v for k, v in options.items() if v is not None}, schedule=WarmupSchedule(**schedule))
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err)) from err


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
    if (run_dir / manifest_io.MANIFEST_NAME).exists():
        raise ConfigError(f"{run_dir} already holds a finished run; choose another --out or remove it")
    chosen = strategy_mod.choose(config.tpu, config.cpu_replicas)  # before any TF op: logical devices
    print(f"strategy: {chosen.description}", flush=True)
    if config.batch_size % chosen.replicas:
        raise ConfigError(f"global batch size {config.batch_size} does not divide across {chosen.replicas} replicas; "
                          f"expected a multiple of {chosen.replicas}")
    created = not run_dir.exists()
    # Only the chief writes (and locks) the run; other workers of a multi-worker run may share its folder.
    with lock.hold(run_dir, "pipeline train") if chosen.is_chief else contextlib.nullcontext():
        plan = _plan(config, chosen)
        model, history, weights, bn_record = _fit_resumable(config, chosen, plan, run_dir, created)
        with strategy_mod.peer_failures_explained(chosen, run_dir):  # evaluating and saving run collectives too
            metrics, per_class = _evaluate(model, plan, config.batch_size)
        print(f"held-out: accuracy {metrics['accuracy']:.4f}, macro-F1 {metrics['macro_f1']:.4f}, loss {metrics['loss']:.4f} "
              f"({plan.heldout_count} examples)", flush=True)
        majority = chance.heldout_majority(plan.train_source, plan.val_source, plan.split)
        chance.warn_if_stuck(history, metrics["accuracy"], majority, pretrained=config.weights is not None)
        if not chosen.is_chief:
            _worker_finish(model, chosen, run_dir, created)
            return run_dir
        record = _record(config, chosen, plan, model, weights, metrics, per_class, majority, bn_record, history)
        with strategy_mod.peer_failures_explained(chosen, run_dir):  # the chief's saves wait on the other workers
            _write_run(Run.new(run_dir, **record), model, plan.train_source.labels, history)
        shutil.rmtree(run_dir / STATE_DIR, ignore_errors=True)  # only now: a kill before this resumes, not retrains
        write_report(run_dir)  # RUN/report.html; a failure to render only warns
    return run_dir


class _Plan(NamedTuple):
    """The data side of a training run, resolved and checked before any training starts."""

    train_source: data_mod.Source
    val_source: Optional[data_mod.Source]
    split: data_mod.Split
    train: "tf.data.Dataset"  # decoded training examples, unbatched
    train_count: int
    heldout: "tf.data.Dataset"
    heldout_count: int
    feed: Dict[str, object]  # whether the decoded training set is cached in memory
    steps_per_epoch: int


def _plan(config: TrainConfig, chosen: strategy_mod.Chosen) -> _Plan:
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
    return _Plan(train_source, val_source, split, train_ds, train_count, heldout_ds, heldout_count, feed, steps_per_epoch)


def _fit_resumable(config: TrainConfig, chosen, plan: _Plan, run_dir: Path, created: bool):
    """`_fit`, with RUN/.train_state kept so that a run that completed an epoch resumes from it."""
    state_dir = run_dir / STATE_DIR
    resuming = (state_dir / "config.json").is_file()
    if config.resume and not resuming:
        raise ConfigError(f"--resume given but {state_dir} holds no interrupted run to resume")
    logs_created = not (run_dir / train_logs.LOG_DIR).exists()
    if chosen.is_chief:
        state_dir.mkdir(parents=True, exist_ok=True)
    try:
        if resuming:
            _check_resumable(state_dir, config)
        elif chosen.is_chief:
            write_json_atomic(state_dir / "config.json", config.as_dict())
        with strategy_mod.peer_failures_explained(chosen, run_dir):
            return _fit(config, chosen, len(plan.train_source.labels), plan.train, plan.feed["cached"], plan.heldout,
                        plan.steps_per_epoch, _eval_steps(plan.heldout_count, config.batch_size), state_dir)
    except BaseException:
        # Nothing of a run that never completed an epoch is kept (and a folder the user already had
        # is left as it was); a run that completed one keeps its state to resume from.
        if not chosen.is_chief:
            _remove_worker_leftovers(run_dir, created)
        elif not (state_dir / "history.json").exists():
            shutil.rmtree(run_dir if created else state_dir, ignore_errors=True)
            if logs_created:
                shutil.rmtree(run_dir / train_logs.LOG_DIR, ignore_errors=True)
        raise


def _worker_finish(model, chosen, run_dir: Path, created: bool) -> None:
    """A non-chief worker takes part in every save (collectives); only the chief's copy is kept."""
    with tempfile.TemporaryDirectory() as scratch, strategy_mod.peer_failures_explained(chosen, run_dir):
        _save_models(model, Path(scratch) / "saved_model", Path(scratch) / "keras_model.keras")
    _remove_worker_leftovers(run_dir, created)
    print("this worker is done; the chief writes the run directory", flush=True)


def _remove_worker_leftovers(run_dir: Path, created: bool) -> None:
    # A worker's RUN may be the chief's (shared storage): it removes only what it left empty.
    state_dir = run_dir / STATE_DIR
    for path in (state_dir / "backup", state_dir / "backup_frozen", state_dir) + ((run_dir,) if created else ()):
        _remove_if_empty(path)  # BackupAndRestore leaves its empty folder behind


def _record(config: TrainConfig, chosen, plan: _Plan, model, weights, metrics, per_class, majority, bn_record, history) -> dict:
    """What the manifest records of the training run, for every later stage."""
    return {
        "model": {
            "name": config.model,
            "image_size": config.size,
            "num_classes": len(plan.train_source.labels),
            "options": dict(config.model_options),
            "parameters": int(model.count_params()),
            "weights": weights,  # starting weights: source (imagenet | file), path, url, sha256; None = random
            "in_model_preprocessing": "Rescaling(1/127.5, offset=-1): the model takes raw RGB pixels 0..255",
        },
        # How an image becomes the model's input, for every later stage and the device.
        "preprocessing": data_mod.TRAINING_CONTRACT.as_record(),
        "labels": plan.train_source.labels,
        "data": {
            "train": plan.train_source.describe(),
            "val": plan.val_source.describe() if plan.val_source else None,
            "split": {**asdict(plan.split), "train_examples": plan.train_count, "heldout_examples": plan.heldout_count,
                      "method": "seeded hash of each example's identity" if not plan.val_source else "separate --val-data"},
            "identity": data_mod.identity_record(plan.train_source, plan.val_source, plan.split),
        },
        "training": {
            "strategy": chosen.kind,
            "strategy_description": chosen.description,
            "replicas": chosen.replicas,
            "global_batch": config.batch_size,
            "per_replica_batch": config.batch_size // chosen.replicas,
            "steps_per_epoch": plan.steps_per_epoch,
            "feed": plan.feed,  # decoded training set cached in memory when it fits cache_mb, else read every epoch
            "batchnorm": bn_record,  # how the saved BatchNorm statistics were obtained (pipeline/training/batchnorm.py)
            "steps_per_execution": _steps_per_execution(config, chosen),
            "epochs": config.epochs,
            "mixed_precision": keras.mixed_precision.global_policy().name,
            "schedule": config.schedule.as_dict(),
            "seed": config.seed,
            "tensorboard": train_logs.LOG_DIR if config.tensorboard else None,  # event files inside RUN
            "config": config.as_dict(),
        },
        "metrics": {"heldout": metrics, "heldout_per_class": per_class, "heldout_majority": majority.as_dict(),
                    "final_epoch": history[-1] if history else {}},
        "versions": _versions(),
    }


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
            # First, so an epoch's checkpoint is on disk before its line is printed. Every phase keeps its
            # last checkpoint until the run is written: a run resumed after the switch gets the head it
            # trained, and one killed while writing finishes without training again.
            keras.callbacks.BackupAndRestore(str(state_dir / phase.backup), delete_checkpoint=False),
            *([] if phase.name == "fine_tune" else [keras.callbacks.LearningRateScheduler(config.schedule)]),
            train_logs.LearningRateLog(),
            # Before the epoch's line: its scalars are on disk when the line is printed.
            *([train_logs.EpochTensorBoard(state_dir.parent / train_logs.LOG_DIR)] if config.tensorboard and chosen.is_chief else []),
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
        self.resuming = bool(self.entries)  # the first epoch this process finishes is marked `resumed`
        self.started = time.time()

    def on_epoch_begin(self, epoch, logs=None):
        self.started = time.time()

    def on_epoch_end(self, epoch, logs=None):
        entry = {"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()},
                 "seconds": round(time.time() - self.started, 2)}
        if self.resuming:
            entry["resumed"], self.resuming = True, False
        self.entries = [e for e in self.entries if e["epoch"] < epoch + 1] + [entry]
        if self.write:
            write_json_atomic(self.path, self.entries)
        if not sys.stdout.isatty():
            shown = " - ".join(f"{k} {v:.4g}" for k, v in entry.items() if k not in ("epoch", "seconds", "resumed"))
            print(f"epoch {epoch + 1}/{self.epochs} - {shown} - {entry['seconds']}s", flush=True)

    def history(self):
        return list(self.entries)


def _eval_steps(count: int, batch_size: int) -> int:
    # Keras cannot infer a dataset's length once steps_per_execution > 1.
    return -(-count // batch_size)


def _evaluate(model, plan: _Plan, batch_size: int):
    """Held-out loss and accuracy, then per-class precision, recall, F1 and macro-F1 (edge.metrics) from one
    more pass for the top-1 answers."""
    steps = _eval_steps(plan.heldout_count, batch_size)
    results = model.evaluate(data_mod.eval_pipeline(plan.heldout, batch_size), steps=steps, verbose=0, return_dict=True)
    metrics = {k: float(v) for k, v in results.items()}
    labels = class_metrics.heldout_labels(plan.train_source, plan.val_source, plan.split)
    per_class = class_metrics.heldout_report(model, plan.heldout, labels, batch_size, len(plan.train_source.labels))
    metrics["macro_f1"] = per_class["macro_f1"]
    return metrics, per_class


def _write_run(run: Run, model, labels, history) -> None:
    """The models, labels and history with the manifest that records them, in one transaction."""
    for stale in run.dir.glob(".save-*"):  # left by a process killed while saving (this one holds the lock)
        shutil.rmtree(stale, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=".save-", dir=run.dir))  # same file system: moved in by rename
    try:
        _save_models(model, scratch / "saved_model", scratch / "keras_model.keras")
        with run.transaction() as t:
            t.write("saved_model", scratch / "saved_model")
            t.write("keras_model", scratch / "keras_model.keras")
            t.write("labels", ("\n".join(labels) + "\n").encode("utf-8"))
            t.write("history", json_bytes(history))
            t.set("stages", {"train": {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
