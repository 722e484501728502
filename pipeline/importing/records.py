"""What every task's import records and checks of the model it brings in: the manifest's `model` entry (a task adds its
own entries) and a --labels file held against the model's outputs."""
from __future__ import annotations

from pathlib import Path
from typing import List

from pipeline.errors import ConfigError


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
