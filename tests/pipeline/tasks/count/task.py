"""Counting squares: a regression of the number of objects in a picture, trained, exported, compared and predicted
through pipeline's stages (the Task interface, pipeline/tasks/__init__.py)."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import List

from pipeline.tasks import Evaluation, Plan, Task
from tests.pipeline.tasks.count import data

IMAGES = 96  # made from the seed: the last 20% held out


class Source:
    labels = ["count"]  # one output: the count

    def __init__(self, n: int):
        self.n = n

    def describe(self) -> dict:
        return {"spec": data.SPEC, "kind": "synthetic squares", "examples": self.n}


class Count(Task):
    name = "count"
    default_data = data.SPEC

    def default_image_size(self, model: str) -> int:
        return data.SIZE

    def plan(self, config, chosen) -> Plan:
        import numpy as np
        import tensorflow as tf

        train, heldout = data.split(IMAGES, config.heldout_fraction, config.seed)

        def dataset(examples):
            images = np.stack([data.pixels(e.png) for e in examples]).astype(np.float32)
            return tf.data.Dataset.from_tensor_slices((images, np.array([e.count for e in examples], np.float32)))

        return Plan(Source(IMAGES), None, {"heldout_fraction": config.heldout_fraction, "seed": config.seed},
                    dataset(train), len(train), dataset(heldout), len(heldout), {"cached": False},
                    len(train) // config.batch_size)

    def build(self, config, num_classes: int):
        import tf_keras as keras

        import models

        inputs = keras.Input((data.SIZE, data.SIZE, 3))
        x = keras.layers.Rescaling(1 / 255.0)(inputs)
        x = keras.layers.Conv2D(8, 3, strides=2, activation="relu")(x)
        x = keras.layers.Conv2D(8, 3, strides=2, activation="relu")(x)
        x = keras.layers.GlobalAveragePooling2D()(x)
        return models.Built(keras.Model(inputs, keras.layers.Dense(num_classes)(x)), None, None)

    def compile_options(self):
        import tf_keras as keras

        return {"loss": keras.losses.MeanSquaredError(), "metrics": [keras.metrics.MeanAbsoluteError(name="mae")]}

    def training_batches(self, train, config, seed: int):
        return train.shuffle(256, seed=seed).repeat().batch(config.batch_size, drop_remainder=True)

    def eval_batches(self, heldout, batch_size: int):
        return heldout.batch(batch_size)

    def evaluate(self, model, plan: Plan, config, history: List[dict]) -> Evaluation:
        results = model.evaluate(self.eval_batches(plan.heldout, config.batch_size), verbose=0, return_dict=True)
        metrics = {k: float(v) for k, v in results.items()}
        return Evaluation({"heldout": metrics}, f"held-out: mae {metrics['mae']:.3f}", {})

    def record(self, config, plan: Plan, model, weights):
        from pipeline import data as data_mod

        return {"model": {"name": "count_cnn", "image_size": data.SIZE, "num_classes": 1,
                          "parameters": int(model.count_params())},
                "preprocessing": data_mod.TRAINING_CONTRACT.as_record(),
                "labels": Source.labels,
                "data": {"train": plan.train_source.describe(), "val": None,
                         "split": {**plan.split, "train_examples": plan.train_count, "heldout_examples": plan.heldout_count}}}

    def export(self, config, run):
        from tests.pipeline.tasks.count import export

        return export.export(config, run)

    def comparison(self):
        from tests.pipeline.tasks.count.parity import CountComparison

        return CountComparison()

    def report_sections(self):
        from tests.pipeline.tasks.count import parity

        return {"parity": parity.section}

    def predict(self, config, run, say, progress):
        from tests.pipeline.tasks.count import predict

        return predict.predict(config, run)


TASK = Count()
