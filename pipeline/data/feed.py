"""TPU-ready input pipelines: static batch shapes for training, every example once for evaluation."""
from __future__ import annotations

import os
from typing import Tuple

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE


def decoded_mb(count: int, image_size: int) -> float:
    """Memory the decoded examples take in the cache: uint8 pixels, plus the labels."""
    return count * (image_size * image_size * 3 + 4) / 1e6


def training_pipeline(ds: tf.data.Dataset, global_batch: int, seed: int, cache: bool = False) -> tf.data.Dataset:
    """Shuffled, repeated, batched with drop_remainder (static shapes for the TPU), prefetched.
    `cache`: keep the decoded examples in memory, so only the first epoch reads and decodes."""
    if cache:
        ds = ds.cache()
    ds = ds.shuffle(4096, seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(global_batch, drop_remainder=True).map(_as_model_input, num_parallel_calls=AUTOTUNE)
    return _with_options(ds).prefetch(AUTOTUNE)


def eval_pipeline(ds: tf.data.Dataset, batch: int) -> tf.data.Dataset:
    """Batches in order, keeping the last partial batch (evaluation must see every example)."""
    return _with_options(ds.batch(batch).map(_as_model_input, num_parallel_calls=AUTOTUNE)).prefetch(AUTOTUNE)


def _as_model_input(images, labels):
    # Models take raw pixel values as float32; the uint8 round trip already happened in decode.
    return tf.cast(images, tf.float32), labels


def _with_options(ds: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    # Shard by data, not by file: a handful of TFRecord files or an in-memory array must still
    # split evenly across workers.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    # Parse, select and decode are separate maps for clarity; fused, they cost a third less CPU
    # per example (measured in bench/results/train.md), which on a small host is training time.
    options.experimental_optimization.map_fusion = True
    # No autotuning thread. An iterator's destructor waits for that thread, which can miss its cancellation (woken
    # before the cancellation is marked, it sleeps out its optimization period, which doubles up to a minute): the
    # training iterator, freed when model.fit returns, then held the process idle for 10-20 s in some runs. Without
    # it the AUTOTUNE stages run at the host's core count (capped by TensorFlow's thread pool), the most autotuning
    # would give one stage, and the AUTOTUNE prefetches still size their buffers themselves.
    options.autotune.enabled = False
    options.autotune.initial_parallelism = os.cpu_count() or 1
    return ds.with_options(options)


def to_numpy(ds: tf.data.Dataset) -> Tuple[np.ndarray, np.ndarray]:
    """All (images, labels) of an unbatched example stream as uint8 [N,S,S,3] and int32 [N]."""
    images, labels = [], []
    for x, y in ds.batch(256):
        images.append(x.numpy())
        labels.append(y.numpy())
    if not images:
        return np.zeros((0, 0, 0, 3), np.uint8), np.zeros((0,), np.int32)
    return np.concatenate(images), np.concatenate(labels)

