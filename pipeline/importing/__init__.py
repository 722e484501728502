"""`pipeline import`: a classifier edgeflow did not train, written as a run every later stage reads unchanged.

    pipeline import model.keras --data flowers/ --out runs/flowers-imported
    pipeline import model.onnx --data flowers/ --input-mean 123.675,116.28,103.53 --input-std 58.395,57.12,57.375 --out RUN

One reader per format (keras_file.py, saved_model.py, onnx_file.py) turns the model into a SavedModel and says what
the file states of its input; contract.py completes that with the options (never guessing) and refuses
contradictions; wrap.py puts the model behind edgeflow's pixel contract (raw RGB pixels 0..255, its normalization
inside the graph). The run records the model's origin (format, path, sha256, and a copy of the file under
RUN/original/, which parity runs as the reference: reference.py), the input contract, the labels, the data's identity
and the held-out split, as `pipeline train` records them. Everything is read and checked before RUN is touched: a
refused model leaves nothing behind.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras is tf-keras, as the later stages load it

import platform
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional

from edge.errors import InputError
from pipeline.errors import ConfigError, DataError
from pipeline.importing import contract as contract_mod
from pipeline.importing.saved_model import Loaded

ORIGINAL_FOLDER = "original"  # RUN/original/<the file as given>: parity's reference runs it


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


@dataclass(frozen=True)
class ImportResult:
    run_dir: Path
    format: str
    contract: contract_mod.InputContract
    labels: List[str]
    heldout_examples: int
    seconds: float


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
    """Read, check and wrap the model, then write RUN in one transaction; nothing is written when anything is refused."""
    from edge.labels import read_labels
    from pipeline.rundir import manifest as manifest_io

    started = time.monotonic()
    run_dir = Path(run_dir)
    if config.task != "classify":
        raise ConfigError(f"--task {config.task}: import takes classifiers in this version; expected --task classify")
    if (run_dir / manifest_io.MANIFEST_NAME).exists():
        raise ConfigError(f"{run_dir} already holds a run; choose another --out or remove it")
    if not 0 < config.heldout_fraction < 1:
        raise ConfigError(f"--heldout-fraction {config.heldout_fraction}; expected a fraction in (0, 1)")
    config.given.check()
    fmt = model_format(config.model)
    try:
        labels = read_labels(config.labels_file) if config.labels_file else None
    except InputError as err:
        raise ConfigError(str(err)) from None
    with tempfile.TemporaryDirectory(prefix="edgeflow-import-") as tmp:
        scratch = Path(tmp)
        loaded = _read(fmt, config.model, scratch, config)
        contract = contract_mod.resolve(loaded.input, config.given, str(config.model))
        labels = _labels(labels, config, loaded)
        plan = _data(config, labels, contract.image_size)
        wrapped = scratch / "saved_model"
        from pipeline.importing import wrap

        wrap.write(loaded.saved_model, contract, wrapped, batch=loaded.batch, layout=loaded.converted_layout)
        _check_runs(wrapped, contract, loaded.num_outputs)
        record = _record(config, fmt, loaded, contract, labels, plan)
        _write(run_dir, record, wrapped, config.model, labels)
    return ImportResult(run_dir, fmt, contract, labels, plan["heldout_count"], time.monotonic() - started)


def _read(fmt: str, path: Path, scratch: Path, config: ImportConfig) -> Loaded:
    if fmt == "keras":
        from pipeline.importing import keras_file

        return keras_file.read(path, scratch)
    if fmt == "onnx":
        from pipeline.importing import onnx_file

        onnx_file.check_format(path)  # before the data is read: a file that is not ONNX is named first
        return onnx_file.read(path, scratch, config.given, _sample_pixels(config))
    from pipeline.importing import saved_model

    return saved_model.read(path)


def _sample_pixels(config: ImportConfig):
    """A few of the user's training images at onnx2tf's sample size, uint8 [N, 128, 128, 3]."""
    from pipeline import data as data_mod
    from pipeline.data.feed import to_numpy
    from pipeline.importing.onnx_file import SAMPLE_COUNT, SAMPLE_SIZE

    source = data_mod.open_source(config.data)
    indices = source.indices("train", data_mod.Split(config.heldout_fraction, config.seed))[:SAMPLE_COUNT]
    return to_numpy(source.dataset_at(SAMPLE_SIZE, indices))[0]


def _labels(labels: Optional[List[str]], config: ImportConfig, loaded: Loaded) -> List[str]:
    """The class names in the model's output order: the labels file's, else the data's (sorted folder names)."""
    if labels is not None:
        if len(labels) != loaded.num_outputs:
            raise ConfigError(f"labels file {config.labels_file} names {len(labels)} classes, the model {config.model} "
                              f"outputs {loaded.num_outputs} scores; expected one label per output")
        if len(set(labels)) != len(labels):
            raise ConfigError(f"labels file {config.labels_file} names a class twice; expected distinct names")
        return labels
    from pipeline import data as data_mod

    names = data_mod.open_source(config.data).labels
    if len(names) != loaded.num_outputs:
        raise DataError(f"data {config.data} has {len(names)} classes ({', '.join(names[:10])}), the model {config.model} "
                        f"outputs {loaded.num_outputs} scores; expected one class per output (or --labels FILE naming "
                        "the outputs in order)")
    return names


def _data(config: ImportConfig, labels: List[str], image_size: int) -> dict:
    """The data's record, as `pipeline train` writes it, with the classes numbered in the model's output order."""
    from pipeline import data as data_mod

    train = data_mod.open_source(config.data, labels)
    missing = [name for name, count in zip(labels, _per_class(train, len(labels))) if count == 0]
    if missing:
        raise DataError(f"data {config.data} has no images of class(es) {', '.join(missing)} that the model outputs; "
                        f"expected the classes {', '.join(labels)}")
    val = data_mod.open_source(config.val_data, labels) if config.val_data else None
    split = data_mod.Split(config.heldout_fraction, config.seed)
    train_count = train.num_examples if val else len(train.indices("train", split))
    heldout_count = val.num_examples if val else len(train.indices("heldout", split))
    if heldout_count == 0:
        raise DataError(f"the held-out split of {config.val_data or config.data} is empty; expected at least one image")
    return {
        "train": {**train.describe(), "class_order": list(labels)},  # the model's order, not the folders' sorted one
        "val": val.describe() if val else None,
        "split": {**asdict(split), "train_examples": train_count, "heldout_examples": heldout_count,
                  "method": "seeded hash of each example's identity" if not val else "separate --val-data"},
        "identity": data_mod.identity_record(train, val, split),
        "heldout_count": heldout_count,
    }


def _per_class(source, num_classes: int) -> List[int]:
    counts = [0] * num_classes
    for example in source.examples:
        counts[example.label] += 1
    return counts


def _check_runs(wrapped: Path, contract, num_outputs: int) -> None:
    """The wrapped model answers one grey image with one row of `num_outputs` scores, before anything is written."""
    import numpy as np
    import tensorflow as tf

    serve = tf.saved_model.load(str(wrapped)).signatures["serving_default"]
    size = contract.image_size
    try:
        scores = serve(image=tf.constant(np.full((1, size, size, 3), 128.0, np.float32)))["scores"].numpy()
    except Exception as err:  # the model as given does not run at this size
        raise ConfigError(f"the model does not run on a 1x{size}x{size}x3 image ({type(err).__name__}: "
                          f"{str(err).splitlines()[0][:200]}); expected --image-size at which it runs") from None
    if scores.shape != (1, num_outputs):
        raise ConfigError(f"the model answers a {size}x{size} image with scores of shape {list(scores.shape)}; "
                          f"expected [1, {num_outputs}]")


def _record(config: ImportConfig, fmt: str, loaded: Loaded, contract, labels: List[str], plan: dict) -> dict:
    from pipeline.data import TRAINING_CONTRACT
    from pipeline.rundir.files import sha256_of

    import numpy as np
    import tensorflow as tf

    model_path = Path(config.model)
    return {
        "task": "classify",
        "model": {
            "name": f"imported {fmt}: {model_path.name}",
            "image_size": contract.image_size,
            "num_classes": len(labels),
            "weights": {"source": "imported", "path": str(model_path.resolve()), "sha256": sha256_of(model_path)},
            "in_model_preprocessing": f"the imported model's input preparation, inside the graph: {contract.norm.source}",
        },
        # The wrapped SavedModel takes raw pixels, as edgeflow's own models do: the run's contract is training's.
        "preprocessing": TRAINING_CONTRACT.as_record(),
        "labels": labels,
        "data": {k: v for k, v in plan.items() if k != "heldout_count"},
        "origin": {
            "format": fmt,
            "path": str(model_path.resolve()),
            "sha256": sha256_of(model_path),
            "copy": f"{ORIGINAL_FOLDER}/{model_path.name}",
            "reader": loaded.reader,
            "input_name": loaded.input.name,
            "input_shape": loaded.input.shape,
            "input_contract": contract.as_record(),
            "labels_from": str(config.labels_file) if config.labels_file else "the data's class folders, sorted",
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
