"""BatchNorm statistics that fit the weights: re-estimated over the training data, not left to moving averages.

A BatchNormalization layer normalizes with the batch's own mean and variance while training and
with its moving averages at inference; those averages move by `1 - momentum` per step (Keras'
MobileNetV2 and Xception: 0.999, so about 1,000 steps to forget their starting 0 and 1). A model
trained from scratch on a short run (240 images, 15 epochs, 105 steps) is saved with statistics
that describe neither its data nor its weights, and answers one class for every image.

So a model trained from scratch (no --weights) gets its statistics measured, not averaged: before
every epoch's validation, forward passes in training mode over shuffled training batches (no
weight change) record each layer's input mean and variance per replica and per batch, and the
layer's moving mean and variance are set to the mean and variance over all those examples. Each
epoch's held-out metrics are then those of its weights with the statistics its checkpoint holds;
the last epoch's estimate (the saved model's) takes the most examples, the earlier ones fewer,
and every epoch's log says how many (`batchnorm_examples`). The momentum no longer matters for
anything that is evaluated or written: it is left as Keras builds it. A distributed loop
(`strategy.run` over a distributed dataset) under every tf.distribute strategy.

Pretrained weights (--weights) keep Keras' behaviour: their statistics come from ImageNet-sized
data, and the transfer-learning guide keeps BatchNorm in inference mode while fine-tuning.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional

import numpy as np
import tensorflow as tf
import tf_keras as keras

# Examples per estimate: one pass over the training set, at most this many (in whole batches). A
# channel's mean and variance come from every pixel of every example. Measured on 80 held-out photos
# (bench/results/batchnorm_seeds.md): estimates from 224 examples move held-out accuracy by 0-1 images
# between shuffles (once 3), from 896 or 2,048 by 0-1. Forward passes only, a third of a training step
# each: 2,048 examples cost about 5% of an epoch of the 12,753 flowers.
MAX_EXAMPLES = 2048
# Examples per estimate before the other epochs' validations: those statistics only report on the
# epoch (training normalizes by each batch's own, so they change no weight), and in the same table
# estimates from 224 examples moved held-out accuracy by 0-1 images of 80 between shuffles (once 3).
# Forward passes are a third of a training step, so an estimate over a whole small training set
# before every validation added about a third to each epoch.
INTERIM_EXAMPLES = 256


def layers(model: "keras.Model") -> List["keras.layers.BatchNormalization"]:
    """Every BatchNormalization layer of `model`, nested models included, each once, in model order."""
    found: List = []
    seen = set()

    def walk(layer):
        for inner in getattr(layer, "layers", ()):
            if id(inner) in seen:
                continue
            seen.add(id(inner))
            if isinstance(inner, keras.layers.BatchNormalization):
                found.append(inner)
            walk(inner)

    walk(model)
    return found


class Statistics:
    """What a run does about BatchNorm statistics: `callbacks` for fit and the `record()` for the manifest.

    `batches`: a factory of the shuffled, repeated, batched (images, labels) training pipeline,
    called only when statistics are re-estimated.
    """

    def __init__(self, model, strategy: tf.distribute.Strategy, weights: Optional[str],
                 batches: Callable[[], tf.data.Dataset], steps_per_epoch: int, global_batch: int, last_epoch: int):
        self.layers = layers(model)
        self.pretrained = weights is not None
        self.estimator = None
        self.last_epoch = last_epoch  # 0-based: its estimate is the saved model's
        if self.layers and not self.pretrained:
            count = min(steps_per_epoch, -(-MAX_EXAMPLES // global_batch))
            self.interim = min(count, -(-INTERIM_EXAMPLES // global_batch))
            self.estimator = Reestimator(model, strategy, batches(), count, global_batch)

    @property
    def callbacks(self) -> list:
        return [EstimateBeforeValidation(self.estimator, self.last_epoch, self.interim)] if self.estimator else []

    def record(self) -> Dict[str, object]:
        momentum = sorted({float(layer.momentum) for layer in self.layers})
        if not self.layers:
            return {"method": "none", "layers": 0}
        if self.pretrained:
            return {"method": "pretrained", "layers": len(self.layers), "momentum": momentum,
                    "note": "statistics from the pretrained weights, moving averages while training (Keras' behaviour)"}
        e = self.estimator
        return {
            "method": "reestimated",
            "layers": len(self.layers),
            "batches": e.batches,
            "examples": e.batches * e.global_batch,  # the last epoch's estimate: the saved model's statistics
            "interim_examples": self.interim * e.global_batch,  # each earlier epoch's
            "estimates": e.count,
            "seconds": round(e.seconds, 2),
            "when": "before every epoch's validation, so each epoch's held-out metrics and its checkpoint share them; "
                    "the last epoch's from `examples`, the earlier ones' from `interim_examples` (each epoch's "
                    "batchnorm_examples in history.json)",
            "how": "mean and variance of each BatchNormalization input over shuffled training batches, forward passes "
                   "in training mode, no weight change",
            "momentum": momentum,  # the layers' own, unchanged: it only moves the averages between two estimates
        }


class Reestimator:
    """Sets every BatchNorm layer's moving mean and variance to its input's mean and variance over
    `batches` shuffled training batches, run in training mode under `strategy`."""

    def __init__(self, model, strategy: tf.distribute.Strategy, dataset: tf.data.Dataset, batches: int, global_batch: int):
        self.model, self.strategy, self.batches, self.global_batch = model, strategy, batches, global_batch
        self.layers = layers(model)
        self.dataset = strategy.experimental_distribute_dataset(dataset)
        self.iterator = None  # made on first use and kept: each estimate takes the next shuffled batches
        self.step = tf.function(self._step)
        self.count = 0  # estimates made
        self.seconds = 0.0

    def __call__(self, batches: Optional[int] = None) -> int:
        """One estimate from `batches` batches (None: the estimator's own count); returns the examples it used."""
        batches = self.batches if batches is None else batches
        started = time.perf_counter()
        if self.iterator is None:
            self.iterator = iter(self.dataset)
        n = 0
        sums = [np.zeros((3,) + tuple(layer.moving_mean.shape), np.float64) for layer in self.layers]
        with _momentum(self.layers, 0.0):
            for _ in range(batches):
                # Per layer: [replicas, channels] means and variances of this batch's replica shares.
                means, variances = self.step(self.iterator)
                for total, mean, var in zip(sums, means, variances):
                    mean, var = mean.numpy().astype(np.float64), var.numpy().astype(np.float64)
                    total += (mean.sum(0), (mean * mean).sum(0), var.sum(0))
                n += int(means[0].shape[0]) if means else 0
        for layer, (mean_sum, square_sum, var_sum) in zip(self.layers, sums):
            mean = mean_sum / n
            # Every share has as many examples (drop_remainder, even split), so the variance over all
            # of them is the mean within-share variance plus the variance of the share means.
            variance = var_sum / n + np.maximum(square_sum / n - mean * mean, 0.0)
            layer.moving_mean.assign(mean.astype(np.float32))
            layer.moving_variance.assign(variance.astype(np.float32))
        self.count += 1
        self.seconds += time.perf_counter() - started
        return batches * self.global_batch

    def _step(self, iterator: Iterator):
        def replica(images, labels):
            self.model(images, training=True)
            # Momentum 0: each layer's moving statistics now hold this replica's batch statistics.
            return ([tf.identity(layer.moving_mean)[None] for layer in self.layers],
                    [tf.identity(layer.moving_variance)[None] for layer in self.layers])

        means, variances = self.strategy.run(replica, args=next(iterator))
        return ([self.strategy.gather(m, axis=0) for m in means], [self.strategy.gather(v, axis=0) for v in variances])


@contextmanager
def _momentum(bn_layers, value: float):
    """Each layer's momentum set to `value` while tracing the estimate's step; restored after (the
    saved config keeps the layer's own)."""
    saved = [layer.momentum for layer in bn_layers]
    for layer in bn_layers:
        layer.momentum = value
    try:
        yield
    finally:
        for layer, momentum in zip(bn_layers, saved):
            layer.momentum = momentum


class EstimateBeforeValidation(keras.callbacks.Callback):
    """Re-estimates once per epoch: when validation begins, or at the epoch's end when there is none;
    from all the estimator's batches before the last epoch's validation, from `interim` batches before
    the others'. Puts the examples used into the epoch's logs. Placed before BackupAndRestore, so each
    epoch's checkpoint holds the estimate."""

    def __init__(self, estimator: Reestimator, last_epoch: int, interim: int):
        super().__init__()
        self.estimator, self.last_epoch, self.interim = estimator, last_epoch, interim
        self.epoch, self.examples = 0, None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch, self.examples = epoch, None

    def on_test_begin(self, logs=None):
        self._estimate()

    def on_epoch_end(self, epoch, logs=None):
        self._estimate()
        if logs is not None:
            logs["batchnorm_examples"] = self.examples

    def _estimate(self):
        if self.examples is None:
            self.examples = self.estimator(None if self.epoch >= self.last_epoch else self.interim)
