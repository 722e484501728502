"""TensorBoard event files for a training run, and the learning rate in every epoch's logs.

    tensorboard --logdir RUN/logs

tf.summary needs the tensorboard package to write anything (TensorFlow 2.21 does not bring it; the
host extra does).

Keras' own TensorBoard callback writes RUN/logs/train and RUN/logs/validation: per-epoch loss,
accuracy and learning rate, and the model's graph. Steps are epoch numbers, so a resumed run's
event files continue where the interrupted one stopped.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import tf_keras as keras

from pipeline.rundir.files import write_json_atomic

LOG_DIR = "logs"  # inside RUN


class LearningRateLog(keras.callbacks.Callback):
    """Puts the optimizer's learning rate into each epoch's logs as `lr`, in every phase: the
    fine-tune phase has no scheduler to do it. history.json and TensorBoard read it from there."""

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = float(keras.backend.get_value(self.model.optimizer.learning_rate))


class EpochTensorBoard(keras.callbacks.TensorBoard):
    """Keras' TensorBoard callback with two fixes for tf-keras 2.21: the graph is written (tf-keras
    writes it from a batch hook that it runs only while profiling), and the event files are flushed
    at every epoch's end, so a run that is killed keeps the epochs it finished (the writers would
    otherwise flush every two minutes)."""

    def __init__(self, log_dir: Path):
        super().__init__(log_dir=str(log_dir), histogram_freq=0, write_graph=True, update_freq="epoch", profile_batch=0)

    def on_epoch_end(self, epoch, logs=None):
        if self._should_write_train_graph:  # set by tf-keras' set_model when write_graph is on
            self._write_keras_model_train_graph()
            self._should_write_train_graph = False
        super().on_epoch_end(epoch, logs)
        for writer in self._writers.values():  # tf-keras keeps its summary writers here
            writer.flush()


class EpochLog(keras.callbacks.Callback):
    """Keeps every epoch's metrics in a JSON file (so a resumed run keeps earlier epochs); its `line`
    callback prints one line per epoch when the progress bar is off.

    The file is written before the epoch's checkpoint is saved and the line printed after it (fit.py
    orders the callbacks: this, BackupAndRestore, `line`). So the file never lacks an epoch the
    checkpoint has: a kill between the two resumes from the epoch before, and the epoch trained again
    replaces its entry. And a printed line means the epoch is kept."""

    def __init__(self, path: Path, epochs: int, write: bool):
        super().__init__()
        self.path, self.epochs, self.write = Path(path), epochs, write
        self.entries = json.loads(self.path.read_text()) if self.path.exists() else []
        self.resuming = bool(self.entries)  # the first epoch this process finishes is marked `resumed`
        self.started = time.time()
        self.line = _EpochLine(self)

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

    def history(self):
        return list(self.entries)


class _EpochLine(keras.callbacks.Callback):
    """The epoch's line, printed once its checkpoint is on disk (off a terminal; the progress bar shows it there)."""

    def __init__(self, log: EpochLog):
        super().__init__()
        self.log = log

    def on_epoch_end(self, epoch, logs=None):
        if not sys.stdout.isatty() and self.log.entries:
            entry = self.log.entries[-1]
            shown = " - ".join(f"{k} {v:.4g}" for k, v in entry.items() if k not in ("epoch", "seconds", "resumed"))
            print(f"epoch {epoch + 1}/{self.log.epochs} - {shown} - {entry['seconds']}s", flush=True)
