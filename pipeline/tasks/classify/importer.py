"""`pipeline import --task classify`: a classifier's steps of the import (pipeline/importing/task_import.py): one input
of pixels, one output of class scores, the class folders' data, the scores' wrapper (wrap.py)."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import List, Optional

from pipeline.errors import ConfigError, DataError
from pipeline.importing import contract as contract_mod
from pipeline.importing.task_import import TaskImport
from pipeline.importing.tuning_share import check_apart, empty_heldout, tuning_fraction, tuning_record


class ClassifyImport(TaskImport):
    def read(self, fmt: str, path: Path, scratch: Path, config):
        if fmt == "keras":
            from pipeline.importing import keras_file

            return keras_file.read(path, scratch)
        if fmt == "onnx":
            from pipeline.importing import onnx_file

            onnx_file.check_format(path)  # before the data is read: a file that is not ONNX is named first
            return onnx_file.read(path, scratch, config.given, sample_pixels(config))
        from pipeline.importing import saved_model

        return saved_model.read(path)

    def contract(self, loaded, config):
        return contract_mod.resolve(loaded.input, config.given, str(config.model))

    def labels(self, labels: Optional[List[str]], config, loaded) -> List[str]:
        """The class names in the model's output order: the labels file's, else the data's (sorted folder names)."""
        if labels is not None:
            check_labels(labels, config, loaded.num_outputs)
            return labels
        from pipeline import data as data_mod

        names = data_mod.open_source(config.data).labels
        if len(names) != loaded.num_outputs:
            raise DataError(f"data {config.data} has {len(names)} classes ({', '.join(names[:10])}), the model {config.model} "
                            f"outputs {loaded.num_outputs} scores; expected one class per output (or --labels FILE naming "
                            "the outputs in order)")
        return names

    def data(self, config, labels: List[str], image_size: int) -> dict:
        """The data's record, as `pipeline train` writes it, with the classes numbered in the model's output order."""
        from pipeline import data as data_mod

        train = data_mod.open_source(config.data, labels)
        missing = [name for name, count in zip(labels, _per_class(train, len(labels))) if count == 0]
        if missing:
            raise DataError(f"data {config.data} has no images of class(es) {', '.join(missing)} that the model outputs; "
                            f"expected the classes {', '.join(labels)}")
        val = data_mod.open_source(config.val_data, labels) if config.val_data else None
        split = data_mod.Split(config.heldout_fraction, config.seed, tuning_fraction(config))
        identity = data_mod.identity_record(train, val, split, tuning_from_val=True)
        if "tuning" in identity:
            check_apart(*(_listed(identity[part]["examples"]) for part in ("tuning", "heldout")), config)
        heldout_count, tuning_count = identity["heldout"]["count"], (identity.get("tuning") or {}).get("count", 0)
        if heldout_count == 0:
            raise DataError(empty_heldout(config, tuning_count))
        return {
            "train": {**train.describe(), "class_order": list(labels)},  # the model's order, not the folders' sorted one
            "val": val.describe() if val else None,
            "split": {**asdict(split), "train_examples": identity["train"]["count"], "heldout_examples": heldout_count,
                      "method": "seeded hash of each example's identity" if not val else "separate --val-data",
                      **tuning_record(split, tuning_count)},
            "identity": identity,
            "heldout_count": heldout_count,
        }

    def wrap(self, loaded, contract, folder: Path) -> None:
        from pipeline.importing import wrap

        wrap.write(loaded.saved_model, contract, folder, batch=loaded.batch, layout=loaded.converted_layout)

    def check(self, folder: Path, contract, loaded) -> None:
        """The wrapped model answers one grey image with one row of scores, one per output, before anything is written."""
        import numpy as np
        import tensorflow as tf

        serve = tf.saved_model.load(str(folder)).signatures["serving_default"]
        size, num_outputs = contract.image_size, loaded.num_outputs
        try:
            scores = serve(image=tf.constant(np.full((1, size, size, 3), 128.0, np.float32)))["scores"].numpy()
        except Exception as err:  # the model as given does not run at this size
            raise ConfigError(f"the model does not run on a 1x{size}x{size}x3 image ({type(err).__name__}: "
                              f"{str(err).splitlines()[0][:200]}); expected --image-size at which it runs") from None
        if scores.shape != (1, num_outputs):
            raise ConfigError(f"the model answers a {size}x{size} image with scores of shape {list(scores.shape)}; "
                              f"expected [1, {num_outputs}]")

    def record(self, config, fmt: str, loaded, contract, labels: List[str], data: dict) -> dict:
        from pipeline.data import TRAINING_CONTRACT

        return {
            "task": "classify",
            "model": model_record(config, fmt, contract, len(labels)),
            # The wrapped SavedModel takes raw pixels, as edgeflow's own models do: the run's contract is training's.
            "preprocessing": TRAINING_CONTRACT.as_record(),
            "labels": labels,
            "data": data,
        }


def model_record(config, fmt: str, contract, num_classes: int) -> dict:
    """The manifest's `model` entry of an imported model (a task adds its own entries)."""
    from pipeline.rundir.files import sha256_of

    model_path = Path(config.model)
    return {
        "name": f"imported {fmt}: {model_path.name}",
        "image_size": contract.image_size,
        "num_classes": num_classes,
        "weights": {"source": "imported", "path": str(model_path.resolve()), "sha256": sha256_of(model_path)},
        "in_model_preprocessing": f"the imported model's input preparation, inside the graph: {contract.norm.source}",
    }


def check_labels(labels: List[str], config, num_outputs: int, outputs: str = "scores") -> None:
    """A --labels file names one distinct class per output."""
    if len(labels) != num_outputs:
        raise ConfigError(f"labels file {config.labels_file} names {len(labels)} classes, the model {config.model} "
                          f"outputs {num_outputs} {outputs}; expected one label per output")
    if len(set(labels)) != len(labels):
        raise ConfigError(f"labels file {config.labels_file} names a class twice; expected distinct names")


def sample_pixels(config):
    """A few of the user's training images at onnx2tf's sample size, uint8 [N, 128, 128, 3]."""
    from pipeline import data as data_mod
    from pipeline.data.feed import to_numpy
    from pipeline.importing.onnx_file import SAMPLE_COUNT, SAMPLE_SIZE

    source = data_mod.open_source(config.data)
    indices = source.indices("train", data_mod.Split(config.heldout_fraction, config.seed))[:SAMPLE_COUNT]
    return to_numpy(source.dataset_at(SAMPLE_SIZE, indices))[0]


def _listed(examples) -> list:
    """The identity record's [id, label, digest] rows as examples."""
    from pipeline.data.examples import Example

    return [Example(*row) for row in examples]


def _per_class(source, num_classes: int) -> List[int]:
    counts = [0] * num_classes
    for example in source.examples:
        counts[example.label] += 1
    return counts


IMPORTER = ClassifyImport()
