"""Image classification: one label per image, softmax scores, top-1 accuracy and macro-F1 on the held-out
split. Each method is what pipeline/train.py and pipeline/training/fit.py did before there were tasks; its export,
parity side and predict are classify_export.py, classify_parity.py and classify_predict.py."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras = tf-keras (Keras 2): see models/registry.py

from dataclasses import asdict
from typing import List

import models
from pipeline.errors import ConfigError, DataError
from pipeline.tasks.classify import class_metrics
from pipeline.tasks import Evaluation, Plan, Task
from pipeline.tasks.classify import chance

# The data pipelines and the training loop (TensorFlow) are imported by the methods that use them, as
# detect.py does: a command that only checks options (`Task.check`, the default size) does not load TensorFlow.


class Classify(Task):
    name = "classify"
    default_data = "digits"
    # Digits are 8x8 images enlarged to 32x32: the small CNN's flattening head keeps where each stroke is, and reaches
    # 0.98 held-out in the same 10 epochs where averaging gave 0.94 (bench/results/digits_demo.md).
    builtin_model_options = (("flatten", 1),)

    def default_image_size(self, model: str) -> int:
        return models.default_image_size(model)

    def plan(self, config, chosen) -> Plan:
        from pipeline import data as data_mod
        from pipeline.data import client_fits

        train_source = data_mod.open_source(config.data)
        # Held-out classes are numbered by the training data's class names.
        val_source = data_mod.open_source(config.val_data, train_source.labels) if config.val_data else None
        # The tuning split (the remedy ladder's) is set aside here, before training: the model never sees it.
        split = data_mod.Split(config.heldout_fraction, config.seed, config.tuning_fraction)
        train_indices = train_source.indices("train", split, separate_heldout=val_source is not None)
        if val_source:
            heldout_ds, heldout_count = val_source.dataset(config.size), val_source.num_examples
        else:
            heldout_ds, heldout_count = train_source.dataset(config.size, "heldout", split), train_source.count("heldout", split)
        fits = client_fits.decide(config.client_fits, train_source, train_indices, config.size)
        print(f"client fits: {'on' if fits.on else 'off'} ({fits.why})", flush=True)
        train_ds = train_source.training_dataset(config.size, train_indices, config.seed if fits.on else None)
        train_count = len(train_indices)
        decoded = data_mod.decoded_mb(train_count, config.size)
        feed = {"decoded_mb": round(decoded, 1), "cache_mb": config.cache_mb, "cached": 0 < config.cache_mb and decoded <= config.cache_mb,
                "client_fits": fits.record()}
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
        return Plan(train_source, val_source, split, train_ds, train_count, heldout_ds, heldout_count, feed, steps_per_epoch)

    def build(self, config, num_classes: int):
        return models.build_recorded(config.model, num_classes, config.size, weights=config.weights, **dict(config.model_options))

    def compile_options(self):
        # The metric made here, its variables with it (under the strategy's scope), not from the name "accuracy" in
        # the first training step: a step that makes variables is traced twice, which cost 2.3-2.5 s a run.
        import tf_keras as keras  # here, not at the top: refusing a config needs the task, not TensorFlow

        return {"loss": keras.losses.SparseCategoricalCrossentropy(),
                "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def training_batches(self, train, config, seed: int):
        from pipeline import data as data_mod

        return data_mod.training_pipeline(train, config.batch_size, seed)

    def eval_batches(self, heldout, batch_size: int):
        from pipeline import data as data_mod

        return data_mod.eval_pipeline(heldout, batch_size)

    def evaluate(self, model, plan: Plan, config, history: List[dict]) -> Evaluation:
        """Held-out loss and accuracy, then per-class precision, recall, F1 and macro-F1 (edge.answers.metrics) from one
        more pass for the top-1 answers."""
        from pipeline.training import fit

        labels = class_metrics.heldout_labels(plan.train_source, plan.val_source, plan.split)
        steps = fit.eval_steps(plan.heldout_count, config.batch_size)
        results = model.evaluate(self.eval_batches(plan.heldout, config.batch_size), steps=steps, verbose=0, return_dict=True)
        metrics = {k: float(v) for k, v in results.items()}
        per_class = class_metrics.heldout_report(model, plan.heldout, labels, config.batch_size, len(plan.train_source.labels))
        metrics["macro_f1"] = per_class["macro_f1"]
        line = (f"held-out: accuracy {metrics['accuracy']:.4f}, macro-F1 {metrics['macro_f1']:.4f}, loss {metrics['loss']:.4f} "
                f"({plan.heldout_count} examples)")
        majority = chance.majority(labels, plan.train_source.labels)
        print(line, flush=True)
        chance.warn_if_stuck(history, metrics["accuracy"], majority, pretrained=config.weights is not None)
        return Evaluation({"heldout": metrics, "heldout_per_class": per_class, "heldout_majority": majority.as_dict()}, line, {})

    def record(self, config, plan: Plan, model, weights):
        from pipeline import data as data_mod

        return {
            "model": {
                "name": config.model,
                "image_size": config.size,
                "num_classes": len(plan.train_source.labels),
                "options": dict(config.model_options),
                "parameters": int(model.count_params()),
                "weights": weights,  # starting weights: source (imagenet | file), path, url, sha256; None = random
                "in_model_preprocessing": models.in_model_preprocessing(config.model),
            },
            # How an image becomes the model's input, for every later stage and the device.
            "preprocessing": data_mod.TRAINING_CONTRACT.as_record(),
            "labels": plan.train_source.labels,
            "data": {
                "train": plan.train_source.describe(),
                "val": plan.val_source.describe() if plan.val_source else None,
                "split": {**asdict(plan.split), "train_examples": plan.train_count, "heldout_examples": plan.heldout_count,
                          "tuning_examples": len(plan.train_source.indices("tuning", plan.split, plan.val_source is not None)),
                          "method": "seeded hash of each example's identity" if not plan.val_source else "separate --val-data"},
                "identity": data_mod.identity_record(plan.train_source, plan.val_source, plan.split),
            },
        }

    def export(self, config, run):
        from pipeline.tasks.classify import export as classify_export

        return classify_export.export(config, run)

    def comparison(self):
        from pipeline.tasks.classify.parity import ClassifyComparison

        return ClassifyComparison()

    def predict(self, config, run, say, progress):
        from pipeline.tasks.classify import predict as classify_predict

        return classify_predict.predict(config, run, say, progress)

    def report_sections(self):
        from pipeline.tasks.classify import report_section

        return {"parity": report_section.parity_section}

    def end_summary(self, run, result):
        from pipeline.tasks.classify import summary

        return [result.report["summary"], *summary.parity(run)]

    def bundle_examples(self, run, data):
        from pipeline.data.heldout import heldout_examples

        heldout = heldout_examples(run, data)
        return [(e.id, e.label, original) for e, original in zip(heldout.examples, heldout.originals)]

    def check(self, config) -> None:
        _refuse_images(config.images)  # another task's options (--head) are refused by the registry's (pipeline/tasks/options.py)

    def gate_limits(self, limits, options):
        return limits._replace(metric=options.get("gate_metric") or limits.metric)  # --gate-metric

    def tuning(self):
        from pipeline.tasks.classify.tuning import CLASSIFICATION_TASK

        return CLASSIFICATION_TASK

    def importer(self):
        from pipeline.tasks.classify.importer import IMPORTER

        return IMPORTER

    def prepare(self, config, source: str, out: str):
        from pipeline.tasks.classify import shards as class_shards

        _refuse_images(config.images)
        return class_shards.write(config, source, out)


def _refuse_images(images) -> None:
    if images:
        raise ConfigError(f"--images {images[0]}: folders of a detector's COCO images (--task detect); a classifier's data "
                          "holds its own images (class folders, digits or TFRecords); expected no --images")


TASK = Classify()
