"""`pipeline import --task detect`: a detector from elsewhere brought into one head's layout (the head that imports,
heads.importing(): its import steps read the file, cut and wrap it, and say what its record holds), with the data and
labels recorded as a trained detection run records them, so export, the pre-flight, parity and the device read it as
they read a run trained with that head. The data's classes must be the model's, in its order (a YOLO data.yaml's
`names`).
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import List, Optional

import numpy as np

from pipeline.errors import DataError
from pipeline.importing.records import check_labels, model_record
from pipeline.importing.task_import import TaskImport


class DetectImport(TaskImport):
    """The import's steps for a detector, and for a task built on detection (pipeline/tasks/pose/importer.py), which
    gives its own head's `steps` and overrides the hooks below (`_source`, `_val`, `_tuning_fraction`) and `record`."""

    def __init__(self, describe, examples, identity, steps=None):
        from pipeline.tasks.detect import heads

        # The task's own record helpers (pipeline/tasks/detect/task.py), so an imported run's data entry is a trained
        # run's.
        self._describe, self._examples, self._identity = describe, examples, identity
        self._steps = steps or heads.importing().import_steps()

    def _source(self, spec: str):
        """The checked data of --data."""
        from pipeline.tasks.detect.data.specs import open_detection

        return open_detection(spec)

    def _val(self, config, source):
        """The checked data of --val-data, refused unless it holds `source`'s classes."""
        from pipeline.tasks.detect.data.specs import open_detection

        return open_detection(config.val_data, source.labels)

    def _tuning_fraction(self, config) -> float:
        """The share of --val-data set aside for the remedy ladder."""
        from pipeline.importing.tuning_share import tuning_fraction

        return tuning_fraction(config)

    def read(self, fmt: str, path: Path, scratch: Path, config):
        return self._steps.read(fmt, path, scratch, config, lambda: sample_pixels(config, self._source(config.data)))

    def contract(self, loaded, config):
        return self._steps.contract(loaded, config)

    def labels(self, labels: Optional[List[str]], config, loaded) -> List[str]:
        return model_labels(labels, config, loaded, list(self._source(config.data).labels))

    def data(self, config, labels: List[str], image_size: int) -> dict:
        from pipeline.data import Split
        from pipeline.data.examples import val_indices
        from pipeline.importing.tuning_share import check_apart, empty_heldout, tuning_record
        from pipeline.tasks import Plan

        _describe, _examples, _identity = self._describe, self._examples, self._identity

        source = self._source(config.data)
        val = self._val(config, source) if config.val_data else None
        split = Split(config.heldout_fraction, config.seed, self._tuning_fraction(config))
        train = _examples(source, "all" if val else "train", split)
        heldout = val.examples if val else _examples(source, "heldout", split)
        tuning = []
        if val and split.tuning_fraction > 0:  # the tuning split is a share of --val-data, the rest held out
            tuning, heldout = ([val.examples[i] for i in val_indices(val.examples, part, split)] for part in ("tuning", "heldout"))
            check_apart(tuning, heldout, config)
        if not heldout:
            raise DataError(empty_heldout(config, len(tuning)))
        plan = Plan(source, val._replace(examples=heldout) if val else None, split, None, len(train), None, len(heldout), {}, 0)
        return {  # the specs as later stages, from any folder, open them again
            "train": _describe(_absolute(config.data), source),
            "val": _describe(_absolute(config.val_data), val) if val else None,
            "images": [],
            "split": {"heldout_fraction": split.heldout_fraction, "seed": split.seed, "train_examples": len(train),
                      "heldout_examples": len(heldout),
                      "method": "seeded hash of each example's identity" if not val else "separate --val-data",
                      **({"tuning_fraction": split.tuning_fraction} if split.tuning_fraction > 0 else {}),
                      **tuning_record(split, len(tuning))},
            "identity": _identity(plan, tuning),
            "heldout_count": len(heldout),
        }

    def wrap(self, loaded, contract, folder: Path) -> None:
        self._steps.wrap(loaded, contract, folder)

    def check(self, folder: Path, contract, loaded) -> None:
        self._steps.check(folder, contract, loaded)

    def record(self, config, fmt: str, loaded, contract, labels: List[str], data: dict) -> dict:
        from pipeline.data import TRAINING_CONTRACT

        model, detection = self._steps.record(model_record(config, fmt, contract, len(labels)), loaded, contract)
        return {
            "task": "detect",
            "model": model,
            "detection": detection,
            "preprocessing": TRAINING_CONTRACT.as_record(),
            "labels": labels,
            "data": data,
        }


def model_labels(labels: Optional[List[str]], config, loaded, data_names: List[str]) -> List[str]:
    """The class names in the model's output order: the --labels file's, the model's metadata's or the data's, each
    checked against the data's `data_names`."""
    if labels is not None:
        check_labels(labels, config, loaded.num_outputs, "class logits")
    names = labels or (loaded.facts or {}).get("names")
    if names is None:
        if len(data_names) != loaded.num_outputs:
            raise DataError(f"data {config.data} has {len(data_names)} classes, the model {config.model} outputs "
                            f"{loaded.num_outputs} class logits; expected one class per logit (or --labels FILE)")
        return data_names
    if names != data_names:
        raise DataError(f"data {config.data} names the classes {', '.join(data_names[:10])}; the model {config.model} "
                        f"{', '.join(names[:10])}; expected the model's classes in its order (a data.yaml's names)")
    return list(names)


def _absolute(spec: str) -> str:
    """A data spec that names a file or folder, made absolute; a built-in one (shapes?...) as given."""
    return str(Path(spec).resolve()) if Path(spec).exists() else spec


def sample_pixels(config, source) -> np.ndarray:
    """A few of `source`'s training images (--data's) at onnx2tf's sample size, uint8 [N, 128, 128, 3]."""
    from PIL import Image

    from pipeline.data import Split
    from pipeline.importing.onnx_file import SAMPLE_COUNT, SAMPLE_SIZE

    picked = source.indices("train", Split(config.heldout_fraction, config.seed))[:SAMPLE_COUNT]
    images = []
    for i in picked:
        with Image.open(io.BytesIO(source.examples[i].image)) as im:
            images.append(np.asarray(im.convert("RGB").resize((SAMPLE_SIZE, SAMPLE_SIZE), Image.BILINEAR)))
    return np.stack(images)
