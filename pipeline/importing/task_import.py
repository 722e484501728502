"""What `pipeline import` asks of the task a model is imported for (pipeline/tasks' Task.importer()): the rest of the
import (the options, the origin record, the one transaction that writes RUN) is the same for every task.

    importer = tasks.get(config.task).importer()
    loaded = importer.read(fmt, path, scratch, config)
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional


class TaskImport:
    """The interface; each method is one step of pipeline/import_model.py's import_model, in order."""

    def read(self, fmt: str, path: Path, scratch: Path, config):
        """The model read by its format's reader, as a SavedModel in `scratch` (saved_model.Loaded)."""
        raise NotImplementedError

    def contract(self, loaded, config):
        """The complete input contract (contract.InputContract); ConfigError on what is missing or contradicts."""
        raise NotImplementedError

    def labels(self, labels: Optional[List[str]], config, loaded) -> List[str]:
        """The class names in the model's output order (`labels`: the --labels file's, or None)."""
        raise NotImplementedError

    def data(self, config, labels: List[str], image_size: int) -> dict:
        """The manifest's `data` entry, plus "heldout_count"; DataError when the data does not fit the model."""
        raise NotImplementedError

    def wrap(self, loaded, contract, folder: Path) -> None:
        """The SavedModel the later stages read, in `folder`: raw RGB pixels 0..255 in, the task's outputs out."""
        raise NotImplementedError

    def check(self, folder: Path, contract, loaded) -> None:
        """The wrapped model answers a grey image in the task's shapes; ConfigError otherwise."""
        raise NotImplementedError

    def record(self, config, fmt: str, loaded, contract, labels: List[str], data: dict) -> dict:
        """The manifest's task, model, preprocessing, labels and data entries (and the task's own, e.g. detection)."""
        raise NotImplementedError
