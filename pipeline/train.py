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
import tempfile
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Dict, NamedTuple, Optional

import numpy as np
import tensorflow as tf
import tf_keras as keras

from pipeline import data as data_mod
from pipeline.inference import class_metrics
from pipeline.rundir import lock, manifest as manifest_io
from pipeline.report import write as write_report
from pipeline.training import chance
from pipeline.training import strategy as strategy_mod
from pipeline.training import logs as train_logs
from pipeline.training import fit
from pipeline.errors import ConfigError, DataError
from pipeline.rundir.files import json_bytes, scratch_folder, write_json_atomic
from pipeline.rundir.run import Run
from pipeline.training.config import TrainConfig

STATE_DIR = ".train_state"
# Fields that must match for a run to be resumed: anything that changes the model or the data.
_RESUME_KEYS = ("data", "val_data", "model", "image_size", "model_options", "batch_size", "seed", "heldout_fraction",
                "weights", "frozen_epochs", "unfreeze_from", "fine_tune_learning_rate")


# ---------------------------------------------------------------------------------------------


def train_model(config: TrainConfig, run_dir: Path) -> Path:
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
    plan = _plan(config, chosen)  # before the lock: data that is refused leaves no folder behind
    # Only the chief writes (and locks) the run; other workers of a multi-worker run may share its folder.
    with lock.hold(run_dir, "pipeline train") if chosen.is_chief else contextlib.nullcontext():
        model, history, weights, bn_record = _fit_resumable(config, chosen, plan, run_dir, created)
        heldout_labels = class_metrics.heldout_labels(plan.train_source, plan.val_source, plan.split)
        with strategy_mod.peer_failures_explained(chosen, run_dir):  # evaluating and saving run collectives too
            metrics, per_class = _evaluate(model, plan, config.batch_size, heldout_labels)
        print(f"held-out: accuracy {metrics['accuracy']:.4f}, macro-F1 {metrics['macro_f1']:.4f}, loss {metrics['loss']:.4f} "
              f"({plan.heldout_count} examples)", flush=True)
        majority = chance.majority(heldout_labels, plan.train_source.labels)
        chance.warn_if_stuck(history, metrics["accuracy"], majority, pretrained=config.weights is not None)
        if not chosen.is_chief:
            _worker_finish(model, chosen, run_dir, created)
            return run_dir
        record = _record(config, chosen, plan, model, weights, metrics, per_class, majority, bn_record, history)
        with strategy_mod.peer_failures_explained(chosen, run_dir):  # the chief's saves wait on the other workers
            _write_run(Run.new(run_dir, **record), model, plan.train_source.labels, history)
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
    train_ds = train_source.training_dataset(config.size, train_indices, config.seed if config.client_fits else None)
    train_count = len(train_indices)
    decoded = data_mod.decoded_mb(train_count, config.size)
    feed = {"decoded_mb": round(decoded, 1), "cache_mb": config.cache_mb, "cached": 0 < config.cache_mb and decoded <= config.cache_mb}
    # The held-out set is read by every epoch's validation and twice more at the end: decoded once and kept
    # when it fits the budget beside the training set.
    feed["heldout_cached"] = feed["cached"] and decoded + data_mod.decoded_mb(heldout_count, config.size) <= config.cache_mb
    if feed["heldout_cached"]:
        heldout_ds = heldout_ds.cache()
        # Filled now, by one pass to its end: a reader that stops at the last batch (Keras' validation_steps)
        # leaves a partial cache that TensorFlow throws away.
        for _ in heldout_ds.batch(256):
            pass
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
            return fit.fit(config, chosen, len(plan.train_source.labels), plan.train, plan.feed["cached"], plan.heldout,
                        plan.steps_per_epoch, fit.eval_steps(plan.heldout_count, config.batch_size), state_dir)
    except BaseException:
        # Nothing of a run that never completed an epoch is kept (and a folder the user already had
        # is left as it was); a run that completed one keeps its state to resume from.
        if not chosen.is_chief:
            _remove_worker_leftovers(run_dir, created)
        elif not (state_dir / "history.json").exists():
            shutil.rmtree(state_dir, ignore_errors=True)
            if logs_created:
                shutil.rmtree(run_dir / train_logs.LOG_DIR, ignore_errors=True)
            if created:  # all but the lock file, which is never removed (pipeline/rundir/lock.py)
                for path in run_dir.iterdir():
                    if path.name not in (lock.LOCK_NAME, lock.HOLDER_NAME):
                        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
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
            "steps_per_execution": fit.steps_per_execution(config, chosen),
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


def _evaluate(model, plan: _Plan, batch_size: int, labels):
    """Held-out loss and accuracy, then per-class precision, recall, F1 and macro-F1 (edge.metrics) from one
    more pass for the top-1 answers, against the held-out `labels`."""
    steps = fit.eval_steps(plan.heldout_count, batch_size)
    results = model.evaluate(data_mod.eval_pipeline(plan.heldout, batch_size), steps=steps, verbose=0, return_dict=True)
    metrics = {k: float(v) for k, v in results.items()}
    per_class = class_metrics.heldout_report(model, plan.heldout, labels, batch_size, len(plan.train_source.labels))
    metrics["macro_f1"] = per_class["macro_f1"]
    return metrics, per_class


def _write_run(run: Run, model, labels, history) -> None:
    """The models, labels and history with the manifest that records them, in one transaction, which also takes
    RUN/.train_state away: the checkpoints go when the run they made is committed and durable, not before (a
    kill before the commit resumes from them and writes the run without training again)."""
    with scratch_folder(run.dir, prefix=".save-") as scratch:  # same file system: moved in by rename
        _save_models(model, scratch / "saved_model", scratch / "keras_model.keras")
        with run.transaction() as t:
            t.write("saved_model", scratch / "saved_model")
            t.write("keras_model", scratch / "keras_model.keras")
            t.write("labels", ("\n".join(labels) + "\n").encode("utf-8"))
            t.write("history", json_bytes(history))
            t.set("stages", {"train": {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}})
            t.remove(run.dir / STATE_DIR)


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
