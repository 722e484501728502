"""Pose: each object's box, class and keypoints per image. The model is a detector with a keypoint output (the pose
heads of pipeline/tasks/pose/heads/: model, loss, export and decoding), trained on detection's backbones; the held-out
split is scored by COCO's keypoint evaluator with the data's OKS sigmas (scores.py).

The manifest's `pose` entry is what export, parity and the device need to read the head's outputs: the head's own
entries, the input's resize, the most objects an image may hold and the keypoint layout (names, skeleton, flip_idx,
sigmas and where they came from).
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras = tf-keras (Keras 2): see models/registry.py

import functools
import hashlib
import json
from typing import List, Sequence

import numpy as np

from pipeline.errors import ConfigError
from pipeline.tasks import Evaluation, Plan, Task
from pipeline.tasks.detect import task as detect  # pose's model is a detector with keypoints (BUILDS_ON)
from pipeline.tasks.train_defaults import TRAIN_DEFAULTS

IMAGE_SIZE = {"small_cnn": 128, "mobilenet_v2": 224}  # detection's (pipeline/tasks/detect/task.py)
RESIZE = "stretch"  # training, held-out scoring and the device stretch the whole image to the square input
MIN_CROP = 0.85  # training crops keep each side >= this share of the image, as detection's


class Pose(Task):
    name = "pose"
    default_data = "figures"
    train_defaults = TRAIN_DEFAULTS["pose"]

    def input_size_step(self, run) -> int:
        from pipeline.tasks.pose import heads

        return max(heads.of_run(run).strides())

    def check(self, config) -> None:
        detect.check_detector(config, self.name, "model", max(_head(config).strides()))

    def default_image_size(self, model: str) -> int:
        return IMAGE_SIZE.get(model, 128)

    def plan(self, config, chosen) -> Plan:
        from pipeline.tasks.pose.data import augment

        source = _opened(config.data, tuple(config.images or ()))
        val = _opened(config.val_data, tuple(config.images or ()), tuple(source.labels), source.layout) if config.val_data else None
        split, train, heldout, steps_per_epoch = detect.split_examples(config, source, val)
        k = source.layout.count
        feed = detect.feed_entry(config, train, "after the cache: a flip that renumbers the keypoints by flip_idx and a "
                                                "crop, drawn anew every epoch")
        heldout_ds = _head(config).with_targets(config, augment.fitted(augment.decoded(heldout, k, config.max_boxes), config.size,
                                                                       source.layout.flip_idx))
        return Plan(source, val, split, augment.decoded(train, k, config.max_boxes), len(train), heldout_ds, len(heldout),
                    feed, steps_per_epoch)

    def build(self, config, num_classes: int):
        import models
        from models import pretrained

        layout = _opened(config.data, tuple(config.images or ())).layout
        imagenet = config.weights == models.IMAGENET
        with pretrained.keras_downloads() as fetched:
            model = _head(config).build(config, num_classes, layout.sigmas, imagenet)
        return models.Built(model, None, pretrained.record(config.weights, fetched) if imagenet else None)

    def compile_options(self):
        return {}  # the loss is the model's own train_step

    def training_batches(self, train, config, seed: int):
        import tensorflow as tf

        from pipeline.data.feed import _with_options
        from pipeline.tasks.pose.data import augment

        layout = _opened(config.data, tuple(config.images or ())).layout
        ds = train.shuffle(4096, seed=seed, reshuffle_each_iteration=True).repeat()
        ds = _head(config).with_targets(config, augment.fitted(ds, config.size, layout.flip_idx, training=True, seed=seed,
                                                               min_crop=MIN_CROP))
        ds = ds.batch(config.batch_size, drop_remainder=True).map(detect._as_model_input, num_parallel_calls=tf.data.AUTOTUNE)
        return _with_options(ds).prefetch(tf.data.AUTOTUNE)

    def eval_batches(self, heldout, batch_size: int):
        return detect.TASK.eval_batches(heldout, batch_size)  # batched and cast as detection's

    def evaluate(self, model, plan: Plan, config, history: List[dict]) -> Evaluation:
        from pipeline.tasks.detect.infer import Nms
        from pipeline.tasks.pose import scores
        from pipeline.tasks.pose.samples import heldout_document

        examples = detect._heldout(plan)
        labels, layout = plan.train_source.labels, plan.train_source.layout
        nms = Nms()
        predictions = _head(config).predict(model, examples, config, nms)
        found = scores.evaluate(examples, predictions, labels, layout)
        final = history[-1] if history else {}
        metrics = {"oks_map": found.oks_map, "oks_map50": found.oks_map50, "box_map": found.box_map,
                   "box_map50": found.box_map50, "pixel_error": found.pixel_error["mean"], "loss": final.get("val_loss"),
                   "images": len(examples), "objects": int(sum(len(e.boxes) for e in examples))}
        error = found.pixel_error
        line = (f"held-out: OKS mAP@[.5:.95] {found.oks_map:.4f}, OKS mAP@.5 {found.oks_map50:.4f}, box mAP@.5 "
                f"{found.box_map50:.4f} ({len(examples)} images, {metrics['objects']} objects; COCOeval keypoints, "
                f"sigmas: {layout.sigmas_source})\nkeypoint error, pixels (on {error['matched']} of {error['objects']} "
                "objects found): " + ", ".join(f"{n} {'n/a' if error[n] is None else format(error[n], '.1f')}" for n in layout.names))
        print(line, flush=True)
        record = {"heldout": metrics, "heldout_pixel_error": error,
                  "evaluation": {"evaluator": "pycocotools COCOeval (keypoints, the layout's sigmas; bbox)",
                                 "sigmas": list(layout.sigmas), "sigmas_source": layout.sigmas_source,
                                 "nms": nms.as_dict(), "resize": RESIZE}}
        document = heldout_document(examples, predictions, labels, layout)
        return Evaluation(record, line, {"heldout_poses": json.dumps(document).encode("utf-8")})

    def record(self, config, plan: Plan, model, weights):
        from pipeline.data import TRAINING_CONTRACT

        head = _head(config)
        train = plan.train_source
        return {
            "model": detect.model_entry(config, head, len(train.labels), model, weights),
            "pose": head.record(config, {"resize": RESIZE, "max_boxes": config.max_boxes, "keypoints": train.layout.as_dict()}),
            "preprocessing": TRAINING_CONTRACT.as_record(),
            "labels": list(train.labels),
            "data": detect.data_entry(config, plan, _describe, _identity),
        }

    def saved(self, model):
        return detect.TASK.saved(model)  # the same layers as a plain functional model, as detection saves them

    def export(self, config, run):
        from pipeline.tasks.pose import export

        return export.export(config, run)

    def comparison(self):
        from pipeline.tasks.pose.parity import PoseComparison

        return PoseComparison()

    def predict(self, config, run, say, progress):
        from pipeline.tasks.pose import predict

        return predict.predict(config, run, say, progress)

    def report_sections(self):
        from pipeline.tasks.pose import report  # held-out OKS, the drawn keypoints and skeletons, parity

        return {"pose": report.section}

    def bundle_examples(self, run, data):
        """The recorded held-out images (or --data's, checked as parity checks them), unlabelled: their keypoints stay
        in the run for the OKS mAP."""
        from pipeline.tasks.pose.data.heldout import given_heldout, recorded_heldout

        examples = given_heldout(run, data)[0] if data is not None else recorded_heldout(run)
        return [(e.id, None, e.image) for e in examples]

    def end_summary(self, run, result):
        return detect.TASK.end_summary(run, result)

    def importer(self):
        from pipeline.tasks.pose.importer import PoseImport

        return PoseImport(_opened, _describe, detect._examples, _identity)

    def tuning(self):
        raise ConfigError("--remedy is not built for --task pose yet: the remedy ladder has no pose scoring; export "
                          "without --remedy and judge int8 with `pipeline parity`")

    def prepare(self, config, source: str, out: str):
        """TFRecord shards of `source` with labels.txt and keypoints.json (pipeline/tasks/pose/data/tfrecords.py)."""
        from pipeline.tasks.pose.data.specs import open_pose
        from pipeline.tasks.pose.data.tfrecords import write_pose_tfrecords

        return detect.prepare_shards(config, source, out, open_pose, write_pose_tfrecords)  # keypoints checked as well


@functools.lru_cache(maxsize=4)
def _opened(spec: str, images: tuple, labels: tuple = None, layout=None):
    """The checked data of `spec`, read once for plan, build and the training batches (which are each given the
    config, not the plan)."""
    from pipeline.tasks.pose.data.specs import open_pose

    return open_pose(spec, list(labels) if labels is not None else None, images, layout)


def _head(config):
    """The pose head `config` trains (pipeline/tasks/pose/heads/); the default when the config names none."""
    from pipeline.tasks.pose import heads

    return heads.get(getattr(config, "head", None) or heads.DEFAULT)


def _describe(spec: str, source) -> dict:
    return {**detect._describe(spec, source), "keypoints": source.layout.count}


def _identity(plan: Plan, tuning: Sequence = ()) -> dict:
    """Detection's record of the data (classes, the training and held-out images' summaries, the held-out images one by
    one; none set aside for tuning, as pose has no remedy ladder) with the keypoint names and a digest of each split's
    keypoints, so a later stage can name what changed."""
    record = detect._identity(plan, tuning)
    train = plan.train_source.examples if plan.val_source else detect._examples(plan.train_source, "train", plan.split)
    record["keypoints"] = list(plan.train_source.layout.names)
    for name, examples in (("train", train), ("heldout", detect._heldout(plan))):
        listing = json.dumps([[e.id, np.round(e.keypoints, 5).tolist()] for e in examples], separators=(",", ":"))
        record[name]["keypoints_sha256"] = hashlib.sha256(listing.encode("utf-8")).hexdigest()
    return record


TASK = Pose()
