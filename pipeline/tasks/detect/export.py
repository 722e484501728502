"""`pipeline export` of a detection run: the trained detector converted by its head's export (heads/<head>/: the conversion,
the outputs and their checks, the metadata), float32 or full-integer int8, written into the run with its sidecar.

What it needs comes from the run: the Keras model, the head and input size under `detection`, the labels; int8
calibrates on training-split images (or --calibration-data), stretched to the input as
training fed them. With `--remedy`, an int8 model that fails the detection gate (mAP@.5 drop) on a tuning split
of the training images goes through the remedy ladder (pipeline/remedy/ladder.py, scored by tuning.py),
and the kept model, the ladder's record and the model's metadata say which rung made it.
"""
from __future__ import annotations

import io
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from pipeline.errors import ConfigError
from pipeline.quant.calibration import read_calibration_npy
from pipeline.tasks import Exported
from pipeline.tasks.detect import heads

DEFAULT_CALIBRATION_SAMPLES = 300


class Converted(NamedTuple):
    """One conversion of the run's detector (what the remedy ladder scores and the export writes)."""

    bytes: bytes  # the .tflite file, with its metadata and edgeflow record
    facts: Dict[str, object]  # what the manifest records of it
    input: Dict[str, object]  # the input's quantization
    contract: object  # the PixelContract this model takes (int8: Coral's mean 128, std 128)
    notes: List[str]  # what the user should know


def export(config, run) -> Exported:
    from edge.model.integrity import sidecar_path, sidecar_record
    from pipeline.rundir.files import json_bytes

    int8 = _mode(config)
    outcome = _repair(config, run) if config.repair else None
    model = outcome.chosen.model if outcome else convert(config, run)
    key = "model_int8" if int8 else "model_float"
    record = outcome.record() if outcome else None
    with run.transaction() as t:
        if record is not None or (int8 and run.remedy is not None):
            t.set("remedy", record)  # an int8 export without --remedy leaves no older ladder's record behind
        path = t.write(key, model.bytes, size_bytes=len(model.bytes), **model.facts)
        side = t.write_file(sidecar_path(path), json_bytes(sidecar_record(path.name, model.bytes, run.labels, image_size=run.image_size,
                                                                          input=model.input, preprocessing=model.contract.as_record())))
    what = heads.of_run(run).conversion(run).describes(int8)
    table = f"{path.name}: {len(model.bytes):,} bytes ({what})"
    if outcome:
        from pipeline.remedy import ladder as remedy

        table = remedy.table(outcome) + "\n" + table
    return Exported(path, side, table, tuple(model.notes), tuple(outcome.failures()) if outcome else (), record)


def _repair(config, run):
    """The remedy ladder (one for every task), on this task's tuning split and scores."""
    from pipeline import tasks
    from pipeline.remedy import ladder as remedy

    return remedy.repair(config, run, convert, config.gate, task=tasks.of_run(run).tuning())


def convert(config, run) -> Converted:
    """The run's Keras detector (with the ladder's float edits, if any) converted to `config.mode` by its head's
    converter, verified, with metadata and the edgeflow record."""
    from pipeline import metadata
    from pipeline.quant import convention, verify
    from pipeline.rundir.run import artifact

    int8 = _mode(config)
    head = heads.of_run(run).conversion(run)
    size, labels = run.image_size, run.labels
    detector = heads.of_run(run).float_model(run)
    calibration, calib_facts, notes = calibration_images(config, run, size) if int8 else (None, {}, [])
    key = "model_int8" if int8 else "model_float"
    contract = convention.contract(run.contract, int8=int8)  # what this model takes: Coral's grid for int8
    # The input the int8 converter is held to (convert refuses any other), or the float twin's raw pixels.
    expected = ({"dtype": "uint8", "scale": convention.SCALE, "zero_point": convention.ZERO_POINT["uint8"]} if int8
                else {"dtype": "float32", "scale": None, "zero_point": None})
    facts: Dict[str, object] = {**head.facts, "input": expected, "preprocessing": contract.as_record()}
    if int8:
        facts["calibration"] = calib_facts
    if config.float_edits:
        from pipeline.remedy import float_edits

        detector = float_edits.apply(detector, config.float_edits, calibration, per_tensor=False)
        facts["float_edits"] = list(config.float_edits)
    if config.remedy:
        facts["remedy"] = config.remedy  # which rung of the remedy ladder made this model
    data = head.convert(detector, size, labels, int8=int8, calibration=calibration,
                        name=f"{run.model.name} {head.what} {'int8' if int8 else 'float32'} ({run.dir.name})",
                        record=metadata.record(run, artifact(key).name, contract, facts))
    info = verify.verify_static(data)
    facts["input"] = verify.quantization_of(info, info.inputs[0]) if int8 else expected
    return Converted(data, facts, facts["input"], contract, notes)


def _mode(config) -> bool:
    """True for int8, False for float32; anything else is refused, naming what a detection run takes."""
    int8 = int8_mode(config, "detection")
    refuse_classify_options(config, "detection", "--calibration-samples, --calibration-data and --remedy")
    return int8


def int8_mode(config, what: str) -> bool:
    """True for int8, False for float32 (a detector's two exports, and those of the tasks built on it); ConfigError for
    any other mode, naming a `what` run."""
    mode = config.mode.value
    if mode not in ("float32", "int8"):
        raise ConfigError(f"--{mode} on a {what} run; expected float32 (no flag) or --int8")
    return mode == "int8"


def refuse_classify_options(config, what: str, takes: str) -> None:
    """ConfigError for the export options only a classifier takes, naming what a `what` run's int8 export `takes`."""
    unused = [name for name, value in (("--io-type", config.io_type), ("--per-tensor", config.per_tensor or None),
                                       ("--qat-epochs", config.qat_epochs or None)) if value is not None]
    if unused:
        raise ConfigError(f"{', '.join(unused)} apply to classification runs; a {what} run's int8 export takes {takes} only")


def calibration_images(config, run, size: int, read_training: Optional[Callable] = None) -> Tuple[np.ndarray, dict, list]:
    """(images [n, S, S, 3] uint8, what the manifest records of them, notes): --calibration-data, or a seeded draw of
    the training split (read by `read_training(run)`: detection's reader when not given, a task's built on it its own)
    stretched to the input."""
    wanted = config.calibration_samples or DEFAULT_CALIBRATION_SAMPLES
    if config.calibration_data is not None:
        path = config.calibration_data
        images = read_calibration_npy(path, size)  # header, shape and size checked before the array is read
        source = str(path)
    else:
        exclude = tuple(config.calibration_exclude)  # the remedy ladder's tuning split
        images = _training_images(run, size, wanted, config.seed, exclude, read_training or training_examples)
        source = "train split of " + run.data.train_spec
    n = min(wanted, len(images))
    notes = [f"calibrating on {n} images: fewer than the {wanted} asked for"] if n < wanted else []
    facts = {"source": source, "samples": int(n), "requested": int(wanted), "seed": config.seed}
    if config.calibration_data is None and config.calibration_exclude:
        facts["excluded"] = len(config.calibration_exclude)
    return images[:n], facts, notes


def training_examples(run) -> list:
    """The training split's examples (images and boxes) in the split's order: what calibration and the remedy
    ladder's tuning split draw from, by position."""
    from pipeline.tasks.detect.data.recorded import recorded_share
    from pipeline.tasks.detect.data.specs import open_detection

    return recorded_share(run, open_detection, "all" if run.data.val_spec else "train")


def _training_images(run, size: int, wanted: int, seed: int, exclude: Tuple[int, ...], read: Callable) -> np.ndarray:
    """A seeded draw of the training split's images (`read(run)`) outside `exclude` (positions in the split), stretched
    to the input (bilinear, as training resized them)."""
    from PIL import Image

    examples = read(run)
    kept = np.delete(np.arange(len(examples)), np.asarray(exclude, np.int64))
    chosen = np.sort(np.random.default_rng(seed).permutation(kept)[:wanted])
    images = []
    for i in chosen:
        with Image.open(io.BytesIO(examples[i].image)) as im:
            images.append(np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR)))
    return np.stack(images)
