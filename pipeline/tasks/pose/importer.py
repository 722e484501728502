"""`pipeline import --task pose`: a pose model from elsewhere (an Ultralytics YOLO pose ONNX) brought into the YOLO pose
head's layout (pipeline/tasks/pose/heads/yolo/importer.py cuts, converts and wraps it), with the data, labels and
keypoint layout recorded as a trained pose run records them, so export, the pre-flight, parity and the device read it
as they read a trained run. The data's classes must be the model's, in its order, and its keypoints the model's count.
Pose has no remedy ladder, so no tuning split is set aside: --val-data is held out whole.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import List, Optional

import numpy as np

from pipeline.errors import DataError
from pipeline.importing.records import model_record
from pipeline.importing.task_import import TaskImport


class PoseImport(TaskImport):
    def __init__(self, opened, describe, examples, identity):
        from pipeline.tasks.pose import heads
        from pipeline.tasks.pose.heads.yolo.importer import YoloPoseImport

        # The pose task's own data helpers (pipeline/tasks/pose/task.py), so an imported run's data entry is a trained
        # run's.
        self._opened, self._describe, self._examples, self._identity = opened, describe, examples, identity
        self._steps = YoloPoseImport(heads.DEFAULT)

    def _source(self, spec: str):
        return self._opened(spec, ())

    def read(self, fmt: str, path: Path, scratch: Path, config):
        source = self._source(config.data)
        return self._steps.read(fmt, path, scratch, config, lambda: _sample_pixels(config, source),
                                source.layout.count)

    def contract(self, loaded, config):
        return self._steps.contract(loaded, config)

    def labels(self, labels: Optional[List[str]], config, loaded) -> List[str]:
        from pipeline.tasks.detect.importer import model_labels

        return model_labels(labels, config, loaded, list(self._source(config.data).labels))

    def data(self, config, labels: List[str], image_size: int) -> dict:
        from pipeline.data import Split
        from pipeline.importing.tuning_share import empty_heldout
        from pipeline.tasks import Plan
        from pipeline.tasks.detect.importer import _absolute
        from pipeline.tasks.pose.data.specs import open_pose

        _describe, _examples, _identity = self._describe, self._examples, self._identity
        source = self._source(config.data)
        val = open_pose(config.val_data, list(source.labels), layout=source.layout) if config.val_data else None
        split = Split(config.heldout_fraction, config.seed)
        train = _examples(source, "all" if val else "train", split)
        heldout = val.examples if val else _examples(source, "heldout", split)
        if not heldout:
            raise DataError(empty_heldout(config, 0))
        plan = Plan(source, val, split, None, len(train), None, len(heldout), {}, 0)
        return {  # as pipeline/tasks/pose/task.py records a trained run's data
            "train": _describe(_absolute(config.data), source),
            "val": _describe(_absolute(config.val_data), val) if val else None,
            "images": [],
            "split": {"heldout_fraction": split.heldout_fraction, "seed": split.seed, "train_examples": len(train),
                      "heldout_examples": len(heldout),
                      "method": "seeded hash of each example's identity" if not val else "separate --val-data"},
            "identity": _identity(plan),
            "heldout_count": len(heldout),
        }

    def wrap(self, loaded, contract, folder: Path) -> None:
        self._steps.wrap(loaded, contract, folder)

    def check(self, folder: Path, contract, loaded) -> None:
        self._steps.check(folder, contract, loaded)

    def record(self, config, fmt: str, loaded, contract, labels: List[str], data: dict) -> dict:
        from pipeline.data import TRAINING_CONTRACT
        from pipeline.tasks.pose.options import MAX_BOXES

        model, pose = self._steps.record(model_record(config, fmt, contract, len(labels)), loaded, contract)
        pose["max_boxes"] = MAX_BOXES  # what a trained run records by default: the most objects an image's truth holds
        pose["keypoints"] = self._source(config.data).layout.as_dict()
        return {"task": "pose", "model": model, "pose": pose, "preprocessing": TRAINING_CONTRACT.as_record(),
                "labels": labels, "data": data}


def _sample_pixels(config, source) -> np.ndarray:
    """A few of the user's training images at onnx2tf's sample size, uint8 [N, 128, 128, 3]."""
    from PIL import Image

    from pipeline.data import Split
    from pipeline.importing.onnx_file import SAMPLE_COUNT, SAMPLE_SIZE

    picked = source.indices("train", Split(config.heldout_fraction, config.seed))[:SAMPLE_COUNT]
    images = []
    for i in picked:
        with Image.open(io.BytesIO(source.examples[i].image)) as im:
            images.append(np.asarray(im.convert("RGB").resize((SAMPLE_SIZE, SAMPLE_SIZE), Image.BILINEAR)))
    return np.stack(images)
