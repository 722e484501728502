"""`pipeline export` of a detection run: the trained detector ending in TFLite_Detection_PostProcess
(pipeline/detection/postprocess.py), float32 or full-integer int8, written into the run with its sidecar.

What it needs comes from the run: the Keras model, the anchor spec and input size under `detection`, the
labels; int8 calibrates on training-split images (or --calibration-data), stretched to the input as
training fed them.
"""
from __future__ import annotations

import io
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Tuple

import numpy as np

from pipeline.errors import ConfigError, DataError
from pipeline.tasks import Exported

DEFAULT_CALIBRATION_SAMPLES = 300


def export(config, run) -> Exported:
    import tf_keras as keras

    from edge.integrity import sidecar_path, sidecar_record
    from pipeline.detection.postprocess import Settings, convert
    from pipeline.quant import convention, verify
    from pipeline.rundir.files import json_bytes

    int8 = _mode(config)
    spec = recorded_anchor_spec(run)
    size, labels = run.image_size, run.labels
    detector = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    calibration, facts, notes = _calibration(config, run, size) if int8 else (None, {}, [])
    settings = Settings()
    data = convert(detector, spec, size, labels, settings, int8=int8, calibration=calibration,
                   name=f"{run.model.name} detector {'int8' if int8 else 'float32'} ({run.dir.name})")
    info = verify.verify_static(data)
    inputs = verify.quantization_of(info, info.inputs[0]) if int8 else {"dtype": "float32", "scale": None, "zero_point": None}
    key = "model_int8" if int8 else "model_float"
    contract = convention.contract(run.contract, int8=int8)  # what this model takes: Coral's grid for int8
    with run.transaction() as t:
        path = t.write(key, data, size_bytes=len(data), postprocess=settings._asdict(), input=inputs, preprocessing=contract.as_record(),
                       **({"calibration": facts} if int8 else {}))
        side = t.write_file(sidecar_path(path), json_bytes(sidecar_record(path.name, data, labels, image_size=size, input=inputs,
                                                                          preprocessing=contract.as_record())))
    what = "full-integer int8 up to TFLite_Detection_PostProcess (Edge TPU)" if int8 else "float32, ending in TFLite_Detection_PostProcess"
    return Exported(path, side, f"{path.name}: {len(data):,} bytes ({what})", tuple(notes))


def _mode(config) -> bool:
    """True for int8, False for float32; anything else is refused, naming what a detection run takes."""
    mode = config.mode.value
    if mode not in ("float32", "int8"):
        raise ConfigError(f"--{mode} on a detection run; expected float32 (no flag) or --int8")
    unused = [name for name, value in (("--io-type", config.io_type), ("--per-tensor", config.per_tensor or None),
                                       ("--qat-epochs", config.qat_epochs or None), ("--remedy", config.repair or None))
              if value is not None]
    if unused:
        raise ConfigError(f"{', '.join(unused)} apply to classification runs; a detection run's int8 export takes "
                          "--calibration-samples and --calibration-data only")
    return mode == "int8"


def _calibration(config, run, size: int) -> Tuple[np.ndarray, dict, list]:
    wanted = config.calibration_samples or DEFAULT_CALIBRATION_SAMPLES
    if config.calibration_data is not None:
        path = config.calibration_data
        try:
            images = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise DataError(f"--calibration-data {path}: not a readable .npy array ({err}); expected uint8 images "
                            f"[N, {size}, {size}, 3]") from err
        if images.dtype != np.uint8 or images.ndim != 4 or tuple(images.shape[1:]) != (size, size, 3) or not len(images):
            raise DataError(f"--calibration-data {path} holds {images.dtype} {list(images.shape)}; expected uint8 "
                            f"[N, {size}, {size}, 3] with N >= 1")
        source = str(path)
    else:
        images = _training_images(run, size, wanted, config.seed)
        source = "train split of " + run.data.train_spec
    n = min(wanted, len(images))
    notes = [f"calibrating on {n} images: fewer than the {wanted} asked for"] if n < wanted else []
    return images[:n], {"source": source, "samples": int(n), "requested": int(wanted), "seed": config.seed}, notes


def _training_images(run, size: int, wanted: int, seed: int) -> np.ndarray:
    """A seeded draw of the training split's images, stretched to the input (bilinear, as training resized them)."""
    from PIL import Image

    from pipeline.data.identity import recorded_split
    from pipeline.detection.specs import open_detection

    source = open_detection(run.data.train_spec, images=run.data.images)
    positions = source.indices("all" if run.data.val_spec else "train", recorded_split(run))
    chosen = np.sort(np.random.default_rng(seed).permutation(positions)[:wanted])
    images = []
    for i in chosen:
        with Image.open(io.BytesIO(source.examples[i].image)) as im:
            images.append(np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR)))
    return np.stack(images)


def recorded_anchor_spec(run):
    """The anchor spec a detection run trained with (its manifest's `detection` record)."""
    from pipeline.detection.anchors import AnchorSpec

    anchors = run.detection.get("anchors")
    if not isinstance(anchors, dict):
        raise ConfigError(f"{run.dir}'s manifest records no anchor spec under 'detection'; expected a run from pipeline train --task detect")
    return AnchorSpec(**{k: tuple(v) for k, v in anchors.items()})
