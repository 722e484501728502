"""`pipeline import`: a model edgeflow did not train (a classifier, or an Ultralytics YOLO detector), written as a run
every later stage reads unchanged.

    pipeline import model.keras --data flowers/ --out runs/flowers-imported
    pipeline import model.onnx --data flowers/ --input-mean 123.675,116.28,103.53 --input-std 58.395,57.12,57.375 --out RUN
    pipeline import yolov8n.onnx --task detect --data shapes/data.yaml --out RUN

The task (pipeline/tasks' Task.importer(): classify_import.py, detect_import.py) chooses what is read and checked.
One reader per format (keras_file.py, saved_model.py, onnx_file.py) turns the model into a SavedModel and says what
the file states of its input; contract.py completes that with the options (never guessing) and refuses
contradictions; wrap.py puts the model behind edgeflow's pixel contract (raw RGB pixels 0..255, its normalization
inside the graph). The run records the model's origin (format, path, sha256, and a copy of the file under
RUN/original/, which parity runs as the reference: reference.py), the input contract, the labels, the data's identity
and the held-out split, as `pipeline train` records them. With --val-data, a seeded share of it (--tuning-fraction,
by the hash train sets its own tuning split aside with) is the remedy ladder's tuning split, recorded by identity
like the held-out rest: the model may have trained on any --data image, so only --val-data holds images it never
trained on (tuning_share.py). Without --val-data no tuning split is recorded, and the ladder says it judges on --data
images. Everything is read and checked before RUN is touched: a refused model leaves nothing behind.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras is tf-keras, as the later stages load it

import platform
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from edge.errors import InputError
from pipeline.errors import ConfigError
from pipeline.importing import contract as contract_mod
from pipeline.importing.saved_model import Loaded

ORIGINAL_FOLDER = "original"  # RUN/original/<the file as given>: parity's reference runs it
TUNING_FRACTION = 0.25  # of --val-data, the tuning split's share by default (--tuning-fraction)


@dataclass(frozen=True)
class ImportConfig:
    model: Path
    data: str
    task: str = "classify"
    val_data: Optional[str] = None
    labels_file: Optional[Path] = None
    given: contract_mod.Given = field(default_factory=contract_mod.Given)
    heldout_fraction: float = 0.2  # as `pipeline train` splits by default
    seed: int = 1234
    # share of --val-data set aside as the remedy ladder's tuning split (images the model never trained on); the
    # rest is held out. Larger than train's tuning_fraction (0.1 of all its data): --val-data is usually the
    # smaller set, and a tuning split of a few images judges nothing.
    tuning_fraction: float = TUNING_FRACTION


@dataclass(frozen=True)
class ImportResult:
    run_dir: Path
    format: str
    contract: contract_mod.InputContract
    labels: List[str]
    heldout_examples: int
    seconds: float
    tuning_examples: int = 0  # set aside from --val-data for the remedy ladder


def model_format(path: Path) -> str:
    """keras | savedmodel | onnx, from what MODEL is; ConfigError for anything else."""
    from pipeline.importing import keras_file

    if not path.exists():
        raise ConfigError(f"model {path} not found; expected a .keras or .h5 file, a SavedModel folder or an .onnx file")
    if path.is_dir():
        return "savedmodel"
    if path.suffix.lower() in keras_file.SUFFIXES:
        return "keras"
    if path.suffix.lower() == ".onnx":
        return "onnx"
    raise ConfigError(f"model {path}: unknown kind {path.suffix or '(no suffix)'}; expected a .keras or .h5 file, a SavedModel "
                      "folder or an .onnx file")


def import_model(config: ImportConfig, run_dir: Path) -> ImportResult:
    """Read, check and wrap the model, then write RUN in one transaction; nothing is written when anything is refused.
    What differs by task (the reader's checks, labels, data, wrapper, record) is the task's importer."""
    from edge.model.labels import read_labels
    from pipeline import tasks
    from pipeline.rundir import manifest as manifest_io

    started = time.monotonic()
    run_dir = Path(run_dir)
    importer = tasks.get(config.task).importer()
    if (run_dir / manifest_io.MANIFEST_NAME).exists():
        raise ConfigError(f"{run_dir} already holds a run; choose another --out or remove it")
    if not 0 < config.heldout_fraction < 1:
        raise ConfigError(f"--heldout-fraction {config.heldout_fraction}; expected a fraction in (0, 1)")
    if not 0 <= config.tuning_fraction < 1:
        raise ConfigError(f"--tuning-fraction {config.tuning_fraction}; expected a fraction in [0, 1)")
    config.given.check()
    fmt = model_format(config.model)
    try:
        labels = read_labels(config.labels_file) if config.labels_file else None
    except InputError as err:
        raise ConfigError(str(err)) from None
    with tempfile.TemporaryDirectory(prefix="edgeflow-import-") as tmp:
        scratch = Path(tmp)
        loaded = importer.read(fmt, config.model, scratch, config)
        contract = importer.contract(loaded, config)
        labels = importer.labels(labels, config, loaded)
        plan = importer.data(config, labels, contract.image_size)
        wrapped = scratch / "saved_model"
        importer.wrap(loaded, contract, wrapped)
        importer.check(wrapped, contract, loaded)
        record = _record(config, fmt, loaded, contract, labels, plan, importer)
        _write(run_dir, record, wrapped, config.model, labels)
    return ImportResult(run_dir, fmt, contract, labels, plan["heldout_count"], time.monotonic() - started,
                        plan["split"].get("tuning_examples", 0))


def _record(config: ImportConfig, fmt: str, loaded: Loaded, contract, labels: List[str], plan: dict, importer) -> dict:
    from pipeline.rundir.files import sha256_of

    import numpy as np
    import tensorflow as tf

    model_path = Path(config.model)
    data = {k: v for k, v in plan.items() if k != "heldout_count"}
    return {
        **importer.record(config, fmt, loaded, contract, labels, data),
        "origin": {
            "format": fmt,
            "path": str(model_path.resolve()),
            "sha256": sha256_of(model_path),
            "copy": f"{ORIGINAL_FOLDER}/{model_path.name}",
            "reader": loaded.reader,
            "input_name": loaded.input.name,
            "input_shape": loaded.input.shape,
            # The batch the run's float SavedModel takes, when the model fixes one (an ONNX graph's reshape to [1, -1]):
            # `pipeline predict --model float` feeds it that (pipeline/importing/run_limits.py). None: any batch.
            "float_batch": loaded.batch,
            "input_contract": contract.as_record(),
            "labels_from": str(config.labels_file) if config.labels_file else
            (loaded.facts or {}).get("labels_from", "the data's class folders, sorted"),
            **{k: v for k, v in (loaded.facts or {}).items() if k != "labels_from"},
        },
        "versions": {"python": platform.python_version(), "tensorflow": tf.__version__, "numpy": np.__version__},
    }


def _write(run_dir: Path, record: dict, wrapped: Path, original: Path, labels: List[str]) -> None:
    """RUN's SavedModel, labels, a copy of the original and the manifest, in one transaction; a RUN folder this
    import made goes again if the write fails."""
    from pipeline.rundir import lock
    from pipeline.rundir.files import scratch_folder
    from pipeline.rundir.run import Run

    made = not run_dir.exists()
    try:
        with lock.hold(run_dir, "pipeline import"):
            run = Run.new(run_dir, **record)
            with scratch_folder(run.dir, prefix=".import-") as scratch:  # same file system: moved in by rename
                shutil.copytree(wrapped, scratch / "saved_model")
                copy = scratch / ORIGINAL_FOLDER / original.name
                copy.parent.mkdir()
                (shutil.copytree if original.is_dir() else shutil.copy2)(original, copy)
                with run.transaction() as t:
                    t.write("saved_model", scratch / "saved_model")
                    t.write("labels", ("\n".join(labels) + "\n").encode("utf-8"))
                    t.write_file(run.dir / record["origin"]["copy"], copy)
                    t.set("stages", {"import": {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}})
    except BaseException:
        if made:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
