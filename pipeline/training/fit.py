"""The training loop itself: build the model under the strategy, then `fit` phase by phase (frozen base, then
fine-tuning), with checkpoints to resume from, the learning-rate schedule, BatchNorm statistics, the epoch logs.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras = tf-keras (Keras 2): see models/registry.py

import sys
from pathlib import Path
from typing import Optional

import tensorflow as tf
import tf_keras as keras

from edge.errors import raise_if_stopped
from pipeline.disk_full import disk_full_named
from pipeline.errors import ConfigError, DataError
from pipeline.training import batchnorm, strategy as strategy_mod, transfer
from pipeline.training import logs as train_logs

# Kaggle's TPU tutorial runs several steps per host round trip; elsewhere one is as fast.
TPU_STEPS_PER_EXECUTION = 8


def fit(config, chosen: strategy_mod.StrategyChoice, task, plan, state_dir: Path):
    """Train `task`'s model on `plan` (pipeline.tasks.Plan: the datasets, their sizes, whether the training set is
    cached) under `chosen`, keeping resumable state in `state_dir`: (model, history, starting weights, BatchNorm record)."""
    num_classes, train_ds, heldout_ds = len(plan.train_source.labels), plan.train, plan.heldout
    steps_per_epoch, validation_steps = plan.steps_per_epoch, eval_steps(plan.heldout_count, config.batch_size)
    keras.utils.set_random_seed(config.seed)
    if chosen.is_tpu:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    with chosen.strategy.scope():
        try:
            built = task.build(config, num_classes)
            model = built.model
        except ValueError as err:  # weights that do not fit the model; options were checked in validate()
            raise ConfigError(str(err)) from err
        if config.unfreeze_from:
            transfer.check_layer(built.base, config.unfreeze_from)
        compile_model(model, config, chosen, task)
    if plan.feed["cached"]:
        # One in-memory copy for both readers: training fills it in its first epoch, and the BatchNorm
        # estimates then read the decoded examples from it instead of decoding them again every epoch.
        train_ds = train_ds.cache()
    train = task.training_batches(train_ds, config, config.seed)
    val = task.eval_batches(heldout_ds, config.batch_size)
    statistics = batchnorm.Statistics(model, chosen.strategy, config.weights, steps_per_epoch=steps_per_epoch,
                                      # a shuffle of its own, over the same (cached) examples
                                      batches=lambda: task.training_batches(train_ds, config, config.seed + 1),
                                      global_batch=config.batch_size, last_epoch=config.epochs - 1)
    epoch_log = train_logs.EpochLog(state_dir / "history.json", config.epochs, write=chosen.is_chief)
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
                compile_model(model, config, chosen, task, config.fine_tune_learning_rate if phase.name == "fine_tune" else None)
        callbacks = [
            StopsAtTheNextStep(),
            *statistics.callbacks,  # before the checkpoint: each epoch's holds the statistics its validation used
            *([] if phase.name == "fine_tune" else [keras.callbacks.LearningRateScheduler(config.schedule)]),
            train_logs.LearningRateLog(),
            # Before the epoch's line: its scalars are on disk when the line is printed.
            *([train_logs.EpochTensorBoard(state_dir.parent / train_logs.LOG_DIR)] if config.tensorboard and chosen.is_chief else []),
            # The epoch's history entry is on disk before its checkpoint: a kill between the two resumes one epoch
            # early and trains that epoch again (its entry replaced), never past an epoch history.json lacks.
            epoch_log,
            # Every phase keeps its last checkpoint until the run is written: a run resumed after the switch gets
            # the head it trained, and one killed while writing finishes without training again.
            keras.callbacks.BackupAndRestore(str(state_dir / phase.backup), delete_checkpoint=False),
            epoch_log.line,  # last: a printed epoch is a kept one
        ]
        try:
            with disk_full_named(state_dir, "the epoch's checkpoint and history"):
                model.fit(train, initial_epoch=phase.first_epoch, epochs=phase.end_epoch, steps_per_epoch=steps_per_epoch,
                          validation_data=val, validation_steps=validation_steps,
                          callbacks=callbacks, verbose=1 if on_terminal else 0)
        except tf.errors.InvalidArgumentError as err:
            raise DataError(f"the input pipeline failed during training: {err.message.splitlines()[0][:300]}") from err
    return model, epoch_log.history(), built.weights, statistics.record()


class StopsAtTheNextStep(keras.callbacks.Callback):
    """Ends training at the next step after Ctrl-C or SIGTERM, should a finalizer have swallowed the signal's
    exception (edge.errors.raise_if_stopped); without it, training would run its remaining epochs."""

    def __init__(self):
        super().__init__()
        self._supports_tf_logs = True  # the logs are not read: Keras need not copy them to NumPy every step

    def on_train_batch_end(self, batch, logs=None):
        raise_if_stopped()

    def on_test_batch_end(self, batch, logs=None):
        raise_if_stopped()


def compile_model(model, config, chosen, task, learning_rate: Optional[float] = None) -> None:
    """A fresh Adam at `learning_rate` (None: the schedule's start, which the scheduler then sets), with the
    task's loss and metrics."""
    model.compile(
        optimizer=keras.optimizers.Adam(config.schedule.start if learning_rate is None else learning_rate),
        steps_per_execution=steps_per_execution(config, chosen),
        **task.compile_options(),
    )


def steps_per_execution(config, chosen: strategy_mod.StrategyChoice) -> int:
    if config.steps_per_execution is not None:
        return config.steps_per_execution
    return TPU_STEPS_PER_EXECUTION if chosen.is_tpu else 1


def eval_steps(count: int, batch_size: int) -> int:
    # Keras cannot infer a dataset's length once steps_per_execution > 1.
    return -(-count // batch_size)
