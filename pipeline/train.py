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
import time
from dataclasses import fields
from pathlib import Path
from typing import Dict

import numpy as np
import tensorflow as tf
import tf_keras as keras

from pipeline import tasks
from pipeline.rundir import manifest as manifest_io
from pipeline.report import write as write_report
from pipeline.training import strategy as strategy_mod
from pipeline.training import logs as train_logs
from pipeline.training import fit
from pipeline.disk_full import disk_full_named
from pipeline.errors import ConfigError
from pipeline.rundir.files import json_bytes, scratch_folder
from pipeline.rundir.run import Run
from pipeline.training.config import TrainConfig, resume_keys
from pipeline.training.workers import Workers

STATE_DIR = ".train_state"
_BACKUP_FOLDERS = ("backup", "backup_frozen")  # BackupAndRestore's, one per phase (pipeline/training/transfer.py)


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
    workers = Workers(chosen, run_dir, created=not run_dir.exists())
    task = tasks.get(config.task)
    plan = task.plan(config, chosen)  # before the lock: data that is refused leaves no folder behind
    with workers.lock("pipeline train"):
        with workers.peer_failures_explained():  # evaluating and saving run collectives too
            model, history, weights, bn_record = _fit_resumable(config, chosen, workers, task, plan)
            evaluation = task.evaluate(model, plan, config, history)
            if not workers.is_chief:  # its saves take part in the chief's; RUN is the chief's to write
                workers.finish_elsewhere(lambda folder: _save_models(task.saved(model), folder), run_dir / STATE_DIR,
                                         _BACKUP_FOLDERS)
                return run_dir
            record = _record(config, chosen, task, plan, model, weights, evaluation, bn_record, history)
            _write_run(Run.new(run_dir, **record), task.saved(model), plan.train_source.labels, history, evaluation.artifacts)
        write_report(run_dir)  # RUN/report.html; a failure to render only warns
    return run_dir


def _fit_resumable(config: TrainConfig, chosen, workers: Workers, task, plan: tasks.Plan):
    """`_fit`, with RUN/.train_state kept so that a run that completed an epoch resumes from it."""
    state_dir = workers.run_dir / STATE_DIR
    resuming = (state_dir / "config.json").is_file()
    if config.resume and not resuming:
        raise ConfigError(f"--resume given but {state_dir} holds no interrupted run to resume")
    # Nothing of a run that never completed an epoch is kept (and a folder the user already had
    # is left as it was); a run that completed one keeps its state to resume from.
    with workers.kept_on_failure(state_dir, workers.run_dir / train_logs.LOG_DIR, state_dir / "history.json", _BACKUP_FOLDERS):
        workers.make_folder(state_dir)
        if resuming:
            _check_resumable(state_dir, config)
        else:
            workers.write_json(state_dir / "config.json", config.as_dict())
        return fit.fit(config, chosen, task, plan, state_dir)


def _record(config: TrainConfig, chosen, task, plan: tasks.Plan, model, weights, evaluation, bn_record, history) -> dict:
    """What the manifest records of the training run, for every later stage."""
    return {
        "task": task.name,  # later stages take the task from the run
        **task.record(config, plan, model, weights),  # model, preprocessing, labels, data
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
        "metrics": {**evaluation.metrics, "final_epoch": history[-1] if history else {}},
        "versions": _versions(),
    }


def _check_resumable(state_dir: Path, config: TrainConfig) -> None:
    saved = json.loads((state_dir / "config.json").read_text())
    now = config.as_dict()
    # A key the saved state lacks was added since it was written: the run behaved as the field's `before` value.
    defaults = {f.name: f.metadata["before"] for f in fields(TrainConfig)}
    keys = resume_keys(config)
    saved = {k: saved.get(k, defaults.get(k)) for k in keys}
    changed = [k for k in keys if saved[k] != now.get(k)]
    if changed:
        diffs = ", ".join(f"{k}: saved {saved.get(k)!r}, now {now.get(k)!r}" for k in changed)
        raise ConfigError(f"cannot resume the run in {state_dir.parent}: options changed ({diffs})")
    done = len(json.loads((state_dir / "history.json").read_text())) if (state_dir / "history.json").exists() else 0
    print(f"resuming from epoch {done} of {config.epochs}", flush=True)


def _write_run(run: Run, model, labels, history, extra=None) -> None:
    """The models, labels and history with the manifest that records them, in one transaction, which also takes
    RUN/.train_state away: the checkpoints go when the run they made is committed and durable, not before (a
    kill before the commit resumes from them and writes the run without training again)."""
    with scratch_folder(run.dir, prefix=".save-") as scratch:  # same file system: moved in by rename
        _save_models(model, scratch)
        with run.transaction() as t:
            t.write("saved_model", scratch / "saved_model")
            t.write("keras_model", scratch / "keras_model.keras")
            t.write("labels", ("\n".join(labels) + "\n").encode("utf-8"))
            t.write("history", json_bytes(history))
            for key, content in (extra or {}).items():  # the task's own files (detection: held-out detections)
                t.write(key, content)
            t.set("stages", {"train": {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}})
            t.remove(run.dir / STATE_DIR)


def _save_models(model, folder: Path) -> None:
    # Without every layer's traced functions (Keras' default traces each layer for training and inference,
    # most of the save's time and CPU): every later stage reads the SavedModel through its serving signature,
    # given here as Keras would write it, and reloads the Keras model from keras_model.keras.
    with disk_full_named(folder, "the SavedModel and the Keras model"):
        model.save(str(folder / "saved_model"), save_format="tf", save_traces=False,
                   signatures={"serving_default": serving_signature(model)})
        model.save(str(folder / "keras_model.keras"))


def serving_signature(model):
    """The signature Keras writes by default: the inputs as the model was built for, any batch size; the outputs a
    flat dict by output name; inference mode."""
    args, kwargs = model.save_spec(dynamic_batch=True)

    @tf.function
    def serve(*inputs, **named):
        outputs = model(*inputs, training=False, **named)
        return dict(zip(model.output_names, tf.nest.flatten(outputs)))

    return serve.get_concrete_function(*args, **kwargs)


def _versions() -> Dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        edgeflow = version("edgeflow")  # a newer manifest's reader names it: "made by edgeflow X; update"
    except PackageNotFoundError:
        edgeflow = "unknown"
    return {"edgeflow": edgeflow, "python": platform.python_version(), "tensorflow": tf.__version__,
            "tf_keras": keras.__version__, "numpy": np.__version__}
