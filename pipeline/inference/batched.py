"""The float SavedModel over many images, in batches, under the strategy training would choose (TPU, GPUs, CPU).

TPU-ready: every batch has the same static shape. The last, partial batch is padded with blank images
whose position is -1, and their rows are dropped from the answers. Each image carries its position
through the replicas, so the answers are put back in input order whatever order the input pipeline
and the replicas produce them in, and an image scored twice or never is an error, not a silent gap.
The distributed inference follows TensorFlow's guide to loading a SavedModel under a strategy
(`tf.saved_model.load` in `strategy.scope()`, `strategy.run` on each distributed batch).
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np
import tensorflow as tf

from pipeline.errors import DataError, PipelineError
from pipeline.training.strategy import StrategyChoice

AUTOTUNE = tf.data.AUTOTUNE


def padded_batches(ds: tf.data.Dataset, batch: int, image_size: int) -> tf.data.Dataset:
    """(positions int64 [B], uint8 images [B, S, S, 3]) with B = `batch` for every batch: the last one
    padded with position -1 and zero pixels."""
    def pad(positions, images):
        missing = batch - tf.shape(positions)[0]
        positions = tf.pad(positions, [[0, missing]], constant_values=-1)
        images = tf.pad(images, [[0, missing], [0, 0], [0, 0], [0, 0]])
        return tf.ensure_shape(positions, [batch]), tf.ensure_shape(images, [batch, image_size, image_size, 3])

    options = tf.data.Options()
    options.deterministic = True
    # One machine, one input pipeline: the strategy splits each global batch across its replicas.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.batch(batch).map(pad, num_parallel_calls=AUTOTUNE).with_options(options).prefetch(AUTOTUNE)


class BatchedModel:
    """The run's SavedModel loaded under `chosen`'s strategy, ready to score padded batches."""

    def __init__(self, saved_model: str, chosen: StrategyChoice):
        self.chosen = chosen
        with chosen.strategy.scope():
            # experimental_io_device: a remote TPU's workers cannot read this machine's disk; the host reads it.
            self._loaded = tf.saved_model.load(saved_model, options=tf.saved_model.LoadOptions(experimental_io_device="/job:localhost"))
        self._serve = self._loaded.signatures["serving_default"]  # its variables belong to self._loaded: kept alive with it
        outputs = list(self._serve.structured_outputs)
        if len(outputs) != 1:
            raise PipelineError(f"{saved_model}'s serving signature has outputs {outputs}; expected one score output")
        self._output = outputs[0]

    def scores(self, ds: tf.data.Dataset, total: int, image_size: int, batch: int,
               progress: Optional[Callable[[int], None]] = None) -> Tuple[np.ndarray, np.ndarray]:
        """(scores [total, classes], times scored [total]) of the (position, uint8 image) elements of `ds`,
        row = position. `batch` is the global batch, split evenly across the replicas."""
        strategy, serve, output = self.chosen.strategy, self._serve, self._output
        if batch % self.chosen.replicas:
            raise PipelineError(f"batch size {batch} does not divide across {self.chosen.replicas} replicas; "
                                f"expected a multiple of {self.chosen.replicas}")

        @tf.function
        def step(positions, images):
            def replica(p, x):
                return p, serve(tf.cast(x, tf.float32))[output]

            return strategy.run(replica, args=(positions, images))

        scores: Optional[np.ndarray] = None
        seen = np.zeros(total, np.int64)
        try:
            for positions, images in strategy.experimental_distribute_dataset(padded_batches(ds, batch, image_size)):
                p, s = step(positions, images)
                p = np.concatenate([t.numpy() for t in strategy.experimental_local_results(p)])
                s = np.concatenate([t.numpy() for t in strategy.experimental_local_results(s)])
                real = p >= 0  # the padding's rows are dropped here
                if scores is None:
                    scores = np.full((total, s.shape[1]), np.nan, np.float32)
                scores[p[real]] = s[real]
                np.add.at(seen, p[real], 1)
                if progress:
                    progress(int(real.sum()))
        except tf.errors.InvalidArgumentError as err:
            raise DataError(f"the input pipeline failed while predicting: {err.message.splitlines()[0][:300]}") from err
        return (scores if scores is not None else np.zeros((total, 0), np.float32)), seen
