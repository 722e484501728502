"""`pipeline export` of a detection run: the trained detector ending in TFLite_Detection_PostProcess
(pipeline/tasks/detect/heads/ssd/postprocess.py), float32 or full-integer int8, written into the run with its sidecar.

What it needs comes from the run: the Keras model, the anchor spec and input size under `detection`, the
labels; int8 calibrates on training-split images (or --calibration-data), stretched to the input as
training fed them. With `--remedy`, an int8 model that fails the detection gate (mAP@.5 drop) on a tuning split
of the training images goes through the remedy ladder (pipeline/remedy/ladder.py, scored by detect_tuning.py),
and the kept model, the ladder's record and the model's metadata say which rung made it.
"""
from __future__ import annotations

import io
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Callable, Dict, List, NamedTuple, Tuple

import numpy as np

from pipeline.errors import ConfigError
from pipeline.quant.calibration import read_calibration_npy
from pipeline.tasks import Exported

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
    what = "full-integer int8 up to TFLite_Detection_PostProcess (Edge TPU)" if int8 else "float32, ending in TFLite_Detection_PostProcess"
    if model.facts.get("head") == "yolo":
        what = ("full-integer int8 (Edge TPU)" if int8 else "float32") + ", box distributions and class logits (Frigate's yolo-generic layout)"
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
    converter (the SSD head ends in the post-processing op), verified, with metadata and the edgeflow record."""
    import tf_keras as keras

    from pipeline import metadata
    from pipeline.quant import convention, verify
    from pipeline.rundir.run import artifact

    int8 = _mode(config)
    head = _head_conversion(run)
    size, labels = run.image_size, run.labels
    detector = _detector(run, keras)
    calibration, calib_facts, notes = _calibration(config, run, size) if int8 else (None, {}, [])
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


def _detector(run, keras):
    """The run's float detector: the trained Keras model, or an imported one's wrapped SavedModel (pipeline/importing)."""
    if run.origin:
        from pipeline.tasks.detect.heads.yolo import import_wrap as yolo_wrap

        return yolo_wrap.load(run.artifact("saved_model"))
    return keras.models.load_model(str(run.artifact("keras_model")), compile=False)


class HeadConversion(NamedTuple):
    """What differs between the detector heads' exports."""

    what: str  # the model's name in its metadata: "<model> <what> int8 (<run>)"
    facts: Dict[str, object]  # the head's own facts, first in what the manifest records
    convert: Callable[..., bytes]  # (keras model, size, labels, int8=, calibration=, name=, record=) -> the .tflite


def _head_conversion(run) -> HeadConversion:
    from pipeline.tasks.detect import heads

    if heads.of_run(run) == heads.YOLO:
        from pipeline.tasks.detect.heads.yolo import run_export as yolo_run_export

        return HeadConversion(*yolo_run_export.conversion())
    from pipeline.tasks.detect.heads.ssd.postprocess import Settings, convert as convert_detector

    spec, settings = recorded_anchor_spec(run), Settings()

    def ssd(detector, size, labels, **options) -> bytes:
        return convert_detector(detector, spec, size, labels, settings, **options)

    return HeadConversion("detector", {"postprocess": settings._asdict()}, ssd)


def _mode(config) -> bool:
    """True for int8, False for float32; anything else is refused, naming what a detection run takes."""
    mode = config.mode.value
    if mode not in ("float32", "int8"):
        raise ConfigError(f"--{mode} on a detection run; expected float32 (no flag) or --int8")
    unused = [name for name, value in (("--io-type", config.io_type), ("--per-tensor", config.per_tensor or None),
                                       ("--qat-epochs", config.qat_epochs or None)) if value is not None]
    if unused:
        raise ConfigError(f"{', '.join(unused)} apply to classification runs; a detection run's int8 export takes "
                          "--calibration-samples, --calibration-data and --remedy only")
    return mode == "int8"


def _calibration(config, run, size: int) -> Tuple[np.ndarray, dict, list]:
    wanted = config.calibration_samples or DEFAULT_CALIBRATION_SAMPLES
    if config.calibration_data is not None:
        path = config.calibration_data
        images = read_calibration_npy(path, size)  # header, shape and size checked before the array is read
        source = str(path)
    else:
        exclude = tuple(config.calibration_exclude)  # the remedy ladder's tuning split
        images = _training_images(run, size, wanted, config.seed, exclude)
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
    from pipeline.data.identity import recorded_split
    from pipeline.tasks.detect.data.specs import open_detection

    source = open_detection(run.data.train_spec, images=run.data.images)
    positions = source.indices("all" if run.data.val_spec else "train", recorded_split(run))
    return [source.examples[i] for i in positions]


def _training_images(run, size: int, wanted: int, seed: int, exclude: Tuple[int, ...] = ()) -> np.ndarray:
    """A seeded draw of the training split's images outside `exclude` (positions in the split), stretched to the
    input (bilinear, as training resized them)."""
    from PIL import Image

    examples = training_examples(run)
    kept = np.delete(np.arange(len(examples)), np.asarray(exclude, np.int64))
    chosen = np.sort(np.random.default_rng(seed).permutation(kept)[:wanted])
    images = []
    for i in chosen:
        with Image.open(io.BytesIO(examples[i].image)) as im:
            images.append(np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR)))
    return np.stack(images)


def recorded_anchor_spec(run):
    """The anchor spec a detection run trained with (its manifest's `detection` record)."""
    from pipeline.tasks.detect.heads.ssd.anchors import AnchorSpec

    anchors = run.detection.get("anchors")
    if not isinstance(anchors, dict):
        raise ConfigError(f"{run.dir}'s manifest records no anchor spec under 'detection'; expected a run from pipeline train --task detect")
    return AnchorSpec(**{k: tuple(v) for k, v in anchors.items()})
