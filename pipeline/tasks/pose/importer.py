"""`pipeline import --task pose`: a pose model from elsewhere (an Ultralytics YOLO pose ONNX) brought into the YOLO pose
head's layout (pipeline/tasks/pose/heads/yolo/importer.py cuts, converts and wraps it), with the data, labels and
keypoint layout recorded as a trained pose run records them, so export, the pre-flight, parity and the device read it
as they read a trained run. The data's classes must be the model's, in its order, and its keypoints the model's count.
Pose has no remedy ladder, so no tuning split is set aside: --val-data is held out whole.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

from pipeline.importing.records import model_record
from pipeline.tasks.detect.importer import DetectImport, sample_pixels


class PoseImport(DetectImport):
    """Detection's import steps (the data, the labels, the wrap and check) with the YOLO pose head's steps, pose's data
    and the keypoint layout recorded."""

    def __init__(self, opened, describe, examples, identity):
        from pipeline.tasks.pose import heads
        from pipeline.tasks.pose.heads.yolo.importer import YoloPoseImport

        # The pose task's own data helpers (pipeline/tasks/pose/task.py), so an imported run's data entry is a trained
        # run's.
        super().__init__(describe, examples, identity, YoloPoseImport(heads.DEFAULT))
        self._opened = opened

    def _source(self, spec: str):
        return self._opened(spec, ())

    def _val(self, config, source):
        from pipeline.tasks.pose.data.specs import open_pose

        return open_pose(config.val_data, list(source.labels), layout=source.layout)

    def _tuning_fraction(self, config) -> float:
        return 0.0  # no remedy ladder to tune on: --val-data is held out whole

    def read(self, fmt: str, path: Path, scratch: Path, config):
        source = self._source(config.data)
        return self._steps.read(fmt, path, scratch, config, lambda: sample_pixels(config, source), source.layout.count)

    def record(self, config, fmt: str, loaded, contract, labels: List[str], data: dict) -> dict:
        from pipeline.data import TRAINING_CONTRACT
        from pipeline.tasks.pose.options import MAX_BOXES

        model, pose = self._steps.record(model_record(config, fmt, contract, len(labels)), loaded, contract)
        pose["max_boxes"] = MAX_BOXES  # what a trained run records by default: the most objects an image's truth holds
        pose["keypoints"] = self._source(config.data).layout.as_dict()
        return {"task": "pose", "model": model, "pose": pose, "preprocessing": TRAINING_CONTRACT.as_record(),
                "labels": labels, "data": data}
