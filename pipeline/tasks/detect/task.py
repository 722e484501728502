"""Object detection: boxes and classes per image, a detector of the chosen head (pipeline/tasks/detect/heads/: its model,
loss, export and decoding) on a backbone's feature levels (backbone.py), and COCO's own evaluator on the held-out split.

The manifest's `detection` entry is what export needs to rebuild the head's decoding: the head's own entries, the
input's resize and the most boxes an image may hold.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras = tf-keras (Keras 2): see models/registry.py

import json
from dataclasses import asdict
from typing import Callable, List, Sequence, Tuple

import numpy as np

from pipeline.errors import ConfigError, DataError
from pipeline.tasks import Evaluation, Plan, Task
from pipeline.tasks.train_defaults import TRAIN_DEFAULTS

# The detector's defaults, chosen on `shapes` (bench/results/detect.md).
IMAGE_SIZE = {"small_cnn": 128, "mobilenet_v2": 224}
DETECTOR_OPTIONS = {"small_cnn": ("width",), "mobilenet_v2": ("alpha",)}  # what pipeline/tasks/detect/backbone.py's backbones take
RESIZE = "stretch"  # the square input Frigate feeds; boxes stay normalized to the image
# Training fits this share of its images by letterbox (top-left, zeros right and below), as pycoral's
# detect_image.py feeds a picture that is not square; held-out scoring and the pixel contract stretch.
LETTERBOX_SHARE = 0.25
# Training crops keep each side >= this share of the image: deeper crops enlarge every object, and the held-out
# small ones were then the ones missed (shapes: mAP@.5 0.891 at 0.6, 0.936 at 0.85; bench/results/detect.md).
MIN_CROP = 0.85


class Detect(Task):
    name = "detect"
    default_data = "shapes"
    # Measured on `shapes` (bench/results/detect.md): batch 16 gives twice the updates of 32 for the same images,
    # and a short warm-up from 1e-3 wastes no epoch at a rate too low to learn.
    train_defaults = TRAIN_DEFAULTS["detect"]

    def input_size_step(self, run) -> int:
        from pipeline.tasks.detect import heads

        return max(heads.of_run(run).strides())  # the coarsest feature stride divides the input size

    def size_note(self, size: int) -> str:
        return (f"; Frigate is then given that size as its model's `width: {size}` and `height: {size}` "
                "(with the model trained and exported at it)")

    def report_sections(self):
        from pipeline.tasks.detect import report  # mAP, PR curves, clients, disagreements: its parity too

        return {"detection": report.section}

    def check(self, config) -> None:
        check_detector(config, self.name, "detector", max(_head(config).strides()))

    def default_image_size(self, model: str) -> int:
        return IMAGE_SIZE.get(model, 128)

    def plan(self, config, chosen) -> Plan:
        from pipeline.tasks.detect.data import augment
        from pipeline.tasks.detect.data.specs import open_detection

        images = config.images or ()
        source = open_detection(config.data, images=images)
        val = open_detection(config.val_data, source.labels, images) if config.val_data else None
        split, train, heldout, steps_per_epoch = split_examples(config, source, val)
        feed = feed_entry(config, train, f"after the cache: flip, crop and a letterbox fit for {LETTERBOX_SHARE:.0%} of "
                                         "the images, drawn anew every epoch")
        heldout_ds = _with_targets(config, augment.fitted(augment.decoded(heldout, config.max_boxes), config.size, resize=RESIZE))
        return Plan(source, val, split, augment.decoded(train, config.max_boxes), len(train), heldout_ds, len(heldout), feed,
                    steps_per_epoch)

    def build(self, config, num_classes: int):
        import models
        from models import pretrained

        imagenet = config.weights == models.IMAGENET
        with pretrained.keras_downloads() as fetched:
            model = _head(config).build(config, num_classes, imagenet)
        return models.Built(model, None, pretrained.record(config.weights, fetched) if imagenet else None)

    def compile_options(self):
        return {}  # the loss is the model's own train_step

    def training_batches(self, train, config, seed: int):
        import tensorflow as tf

        from pipeline.data.feed import _with_options
        from pipeline.tasks.detect.data import augment

        # Shuffled and repeated before the augmentation draws are numbered: every epoch augments anew.
        ds = train.shuffle(4096, seed=seed, reshuffle_each_iteration=True).repeat()
        ds = _with_targets(config, augment.fitted(ds, config.size, training=True, seed=seed, resize=RESIZE, min_crop=MIN_CROP,
                                                  letterbox_share=LETTERBOX_SHARE))
        ds = ds.batch(config.batch_size, drop_remainder=True).map(_as_model_input, num_parallel_calls=tf.data.AUTOTUNE)
        return _with_options(ds).prefetch(tf.data.AUTOTUNE)

    def eval_batches(self, heldout, batch_size: int):
        import tensorflow as tf

        from pipeline.data.feed import _with_options

        return _with_options(heldout.batch(batch_size).map(_as_model_input, num_parallel_calls=tf.data.AUTOTUNE)).prefetch(tf.data.AUTOTUNE)

    def evaluate(self, model, plan: Plan, config, history: List[dict]) -> Evaluation:
        from pipeline.tasks.detect.evaluate import evaluate
        from pipeline.tasks.detect.infer import Nms
        from pipeline.tasks.detect.samples import heldout_document

        examples = _heldout(plan)
        labels = plan.train_source.labels
        nms = Nms()
        predictions = _head(config).predict(model, examples, config, RESIZE, nms)
        scores = evaluate(examples, predictions, labels)
        final = history[-1] if history else {}
        metrics = {"map": scores.map, "map50": scores.map50, "loss": final.get("val_loss"), "images": len(examples),
                   "objects": int(sum(len(e.boxes) for e in examples))}
        line = (f"held-out: mAP@[.5:.95] {scores.map:.4f}, mAP@.5 {scores.map50:.4f} ({len(examples)} images, "
                f"{metrics['objects']} objects; COCOeval)\nper class AP@[.5:.95]: "
                + ", ".join(f"{k} {'n/a' if v != v else format(v, '.3f')}" for k, v in scores.per_class.items()))
        print(line, flush=True)
        document = heldout_document(examples, predictions, labels)
        record = {"heldout": metrics, "heldout_per_class": scores.as_dict()["per_class"],
                  "evaluation": {"evaluator": "pycocotools COCOeval (bbox)", "nms": nms.as_dict(), "resize": RESIZE}}
        return Evaluation(record, line, {"heldout_detections": json.dumps(document).encode("utf-8")})

    def record(self, config, plan: Plan, model, weights):
        from pipeline.data import TRAINING_CONTRACT

        head = _head(config)
        train = plan.train_source
        return {
            "model": model_entry(config, head, len(train.labels), model, weights),
            "detection": head.detection(config, {"resize": RESIZE, "max_boxes": config.max_boxes}),
            # The device stretches the whole image to the input by the pixel contract, as training does (with
            # antialiasing); training decodes JPEGs at full size, the contract at a reduced scale for large ones.
            "preprocessing": TRAINING_CONTRACT.as_record(),
            "labels": list(train.labels),
            "data": data_entry(config, plan, _describe, _identity),
        }

    def saved(self, model):
        from pipeline.tasks.detect.trainer import plain

        return plain(model)

    def export(self, config, run):
        from pipeline.tasks.detect import export

        return export.export(config, run)

    def tuning(self):
        from pipeline.tasks.detect import tuning

        return tuning.task()

    def comparison(self):
        from pipeline.tasks.detect.parity import DetectComparison

        return DetectComparison()

    def predict(self, config, run, say, progress):
        from pipeline.tasks.detect import predict

        return predict.predict(config, run, say, progress)

    def end_summary(self, run, result):
        from pipeline.inference import summary

        return [result.report["summary"], *summary.trained(run), summary.gate(result.passed, result.failures)]

    def bundle_examples(self, run, data):
        """The recorded held-out images, or those of `data` checked as parity checks them (data/heldout.py), unlabelled:
        their boxes stay in the run, or in `data`, for the mAP."""
        from pipeline.tasks.detect.data.heldout import given_heldout, recorded_heldout

        examples = recorded_heldout(run) if data is None else given_heldout(run, data).examples
        return [(e.id, None, e.image) for e in examples]

    def importer(self):
        """The import's steps, recording the data as this task records a trained run's (the helpers handed over, so
        the importer needs no import of this module)."""
        from pipeline.tasks.detect.importer import DetectImport

        return DetectImport(describe=_describe, examples=_examples, identity=_identity)

    def prepare(self, config, source: str, out: str):
        from pipeline.tasks.detect.data.specs import open_detection
        from pipeline.tasks.detect.data.tfrecords import write_tfrecords

        return prepare_shards(config, source, out, open_detection, write_tfrecords)


def model_entry(config, head, num_classes: int, model, weights) -> dict:
    """The manifest's `model` entry of a detector trained with `head` (detect's, and the tasks built on it)."""
    return {"name": config.model, "architecture": head.name, "image_size": config.size, "num_classes": num_classes,
            "options": dict(config.model_options), "parameters": int(model.count_params()), "weights": weights,
            "in_model_preprocessing": "Rescaling(1/127.5, offset=-1): the model takes raw RGB pixels 0..255",
            "outputs": head.outputs()}


def split_examples(config, source, val) -> Tuple[object, list, list, int]:
    """(the split, the training examples, the held-out ones, the steps per epoch) of a detector's plan (detect's, and
    the tasks built on it): `val`'s examples held out when --val-data is given; DataError for an empty split."""
    from pipeline.data import Split

    split = Split(config.heldout_fraction, config.seed)
    train = _examples(source, "all" if val else "train", split)
    heldout = val.examples if val else _examples(source, "heldout", split)
    if not heldout:
        raise DataError(f"{config.val_data or config.data}: no held-out images; expected some to evaluate on "
                        "(more images, a larger --heldout-fraction, or --val-data)")
    steps_per_epoch = len(train) // config.batch_size
    if steps_per_epoch < 1:
        raise DataError(f"the training split has {len(train)} images, fewer than one global batch of {config.batch_size}")
    return split, train, heldout, steps_per_epoch


def feed_entry(config, train: list, augmented: str) -> dict:
    """The plan's record of the input pipeline: the decoded training images' size, whether they fit the cache, and
    `augmented`, what is drawn after it."""
    decoded_mb = sum(e.height * e.width * 3 for e in train) / 1e6
    return {"decoded_mb": round(decoded_mb, 1), "cache_mb": config.cache_mb,
            "cached": 0 < config.cache_mb and decoded_mb <= config.cache_mb, "augmented": augmented}


def prepare_shards(config, source: str, out: str, open_data: Callable, write: Callable):
    """`pipeline prepare` of a detector's data (detect's, and the tasks built on it): `source` read by `open_data(spec,
    images=)`, every image and box checked before anything is written, then `write(data, out, shards)` in shards of
    about --shard-mb, refused when `out` already holds shards."""
    import tensorflow as tf

    from pipeline.data.shards import PrepareResult, join_path
    from pipeline.tasks.detect.data.specs import check_images

    check_images(config.images, [source])
    data = open_data(source, images=config.images)
    existing = tf.io.gfile.glob(join_path(out, "*.tfrecord")) if tf.io.gfile.exists(out) else []
    if existing:
        raise ConfigError(f"{out} already holds {os.path.basename(existing[0])}; choose an empty --out (nothing was overwritten)")
    total = sum(len(e.image) for e in data.examples)
    shards = max(1, int(np.ceil(total / (config.shard_mb * 1e6))))
    paths = write(data, out, shards)
    return PrepareResult(paths, join_path(out, "labels.txt"), len(data.examples), 0, join_path(out, "*.tfrecord"))


def data_entry(config, plan: Plan, describe: Callable[[str, object], dict], identity: Callable[[Plan], dict]) -> dict:
    """The manifest's `data` entry of a trained run of detect or a task built on it: each set as `describe(spec,
    source)` records it, where COCO file names were also looked for, the split and `identity(plan)`."""
    val = plan.val_source
    return {
        "train": describe(config.data, plan.train_source),
        "val": describe(config.val_data, val) if val else None,
        "images": list(config.images or ()),  # where COCO file names were also looked for, in order
        "split": {**asdict(plan.split), "train_examples": plan.train_count, "heldout_examples": plan.heldout_count,
                  "method": "seeded hash of each example's identity" if not val else "separate --val-data"},
        "identity": identity(plan),
    }


def check_detector(config, task: str, what: str, stride: int) -> None:
    """Refuse the options a task whose model is a detector on a backbone (detect, and the tasks built on it) cannot
    honour: `what` names its model in the messages, `stride` is its coarsest feature stride."""
    from pipeline.tasks.detect.backbone import BACKBONES
    from pipeline.tasks.detect.data.specs import check_images

    if config.model not in BACKBONES:
        raise ConfigError(f"--task {task}: model {config.model!r} has no detector; expected one of {', '.join(BACKBONES)}")
    takes = DETECTOR_OPTIONS[config.model]
    unknown = sorted(set(dict(config.model_options)) - set(takes))
    if unknown:
        raise ConfigError(f"--task {task}: the {config.model} detector does not take option {unknown[0]!r}; it takes {', '.join(takes)}")
    if config.frozen_epochs or config.unfreeze_from:
        raise ConfigError(f"--task {task} trains the whole {what}; --frozen-epochs and --unfreeze-from are for classify")
    if config.weights and (config.weights != "imagenet" or config.model != "mobilenet_v2"):
        raise ConfigError(f"--task {task}: --weights {config.weights} for {config.model}; expected 'imagenet' with "
                          "mobilenet_v2, or no --weights")
    if config.client_fits:
        raise ConfigError(f"--task {task} fits images by stretching them to the input; --client-fits is for classify")
    check_images(config.images, [config.data, config.val_data])
    if config.size % stride:
        raise ConfigError(f"--task {task}: image size {config.size}; expected a multiple of {stride} (the {what}'s "
                          "coarsest feature stride)")


def _head(config):
    """The head `config` trains (pipeline/tasks/detect/heads/); a config that names none trains the default."""
    from pipeline.tasks.detect import heads

    return heads.get(getattr(config, "head", None) or heads.DEFAULT)


def _with_targets(config, ds):
    """What the head's training step takes (its targets, or the padded ground truth itself)."""
    return _head(config).with_targets(config, ds)


def _as_model_input(images, targets):
    import tensorflow as tf

    return tf.cast(images, tf.float32), targets


def _examples(source, split: str, holdout) -> list:
    return [source.examples[i] for i in source.indices(split, holdout)]


def _heldout(plan: Plan) -> list:
    return plan.val_source.examples if plan.val_source else _examples(plan.train_source, "heldout", plan.split)


def _describe(spec: str, source) -> dict:
    return {"spec": spec, "kind": source.kind, "resolved": source.spec, "num_examples": len(source.examples),
            "num_classes": len(source.labels), "num_objects": int(sum(len(e.boxes) for e in source.examples))}


def _identity(plan: Plan, tuning: Sequence = ()) -> dict:
    """Class names, a summary of the training images with each one's digest (what `pipeline parity --data` refuses)
    and the held-out images one by one (id, digest), as classification records them, so a later stage can name what
    changed; and the `tuning` images so, when any were set aside (`pipeline import --val-data`)."""
    from pipeline.data.seen import digests
    from pipeline.tasks.detect.data.seen import summary

    train = plan.train_source.examples if plan.val_source else _examples(plan.train_source, "train", plan.split)
    heldout = _heldout(plan)
    classes = len(plan.train_source.labels)
    record = {"classes": list(plan.train_source.labels), "train": summary(train, classes),
              "heldout": {**summary(heldout, classes), "examples": [[e.id, e.digest] for e in heldout]},
              "train_digests": digests(train)}
    if tuning:
        record["tuning"] = {**summary(tuning, classes), "examples": [[e.id, e.digest] for e in tuning]}
    return record


TASK = Detect()
