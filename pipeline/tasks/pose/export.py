"""`pipeline export` of a pose run: the trained model converted by its head's export (pipeline/tasks/pose/heads/: the
conversion, the outputs and their checks, the metadata), float32 or full-integer int8, written into the run with its
sidecar, as detection's export does (pipeline/tasks/detect/export.py). int8 calibrates on training-split images (or
--calibration-data), stretched to the input as training fed them. The remedy ladder has no pose scoring yet: --remedy
is refused.
"""
from __future__ import annotations

import io
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np

from pipeline.errors import ConfigError
from pipeline.quant.calibration import read_calibration_npy
from pipeline.tasks import Exported
from pipeline.tasks.detect.export import DEFAULT_CALIBRATION_SAMPLES


def export(config, run) -> Exported:
    from edge.model.integrity import sidecar_path, sidecar_record
    from pipeline import metadata
    from pipeline.quant import convention, verify
    from pipeline.rundir.files import json_bytes
    from pipeline.rundir.run import artifact
    from pipeline.tasks.pose import heads

    int8 = _mode(config)
    head = heads.of_run(run)
    conversion = head.conversion(run)
    key = "model_int8" if int8 else "model_float"
    contract = convention.contract(run.contract, int8=int8)  # what this model takes: Coral's grid for int8
    expected = ({"dtype": "uint8", "scale": convention.SCALE, "zero_point": convention.ZERO_POINT["uint8"]} if int8
                else {"dtype": "float32", "scale": None, "zero_point": None})
    facts = {**conversion.facts, "input": expected, "preprocessing": contract.as_record()}
    calibration, notes = None, []
    if int8:
        calibration, facts["calibration"], notes = _calibration(config, run, run.image_size)
    data = conversion.convert(head.float_model(run), run.image_size, run.labels, int8=int8, calibration=calibration,
                              name=f"{run.model.name} {conversion.what} {'int8' if int8 else 'float32'} ({run.dir.name})",
                              record=metadata.record(run, artifact(key).name, contract, facts))
    info = verify.verify_static(data)
    facts["input"] = verify.quantization_of(info, info.inputs[0]) if int8 else expected
    with run.transaction() as t:
        path = t.write(key, data, size_bytes=len(data), **facts)
        side = t.write_file(sidecar_path(path), json_bytes(sidecar_record(path.name, data, run.labels, image_size=run.image_size,
                                                                          input=facts["input"], preprocessing=contract.as_record())))
    return Exported(path, side, f"{path.name}: {len(data):,} bytes ({conversion.describes(int8)})", tuple(notes))


def _mode(config) -> bool:
    """True for int8, False for float32; what a pose run cannot take is refused by name."""
    mode = config.mode.value
    if mode not in ("float32", "int8"):
        raise ConfigError(f"--{mode} on a pose run; expected float32 (no flag) or --int8")
    if config.repair:
        raise ConfigError("--remedy is not built for --task pose yet: the remedy ladder has no pose scoring; export "
                          "without --remedy and judge int8 with `pipeline parity`")
    unused = [name for name, value in (("--io-type", config.io_type), ("--per-tensor", config.per_tensor or None),
                                       ("--qat-epochs", config.qat_epochs or None)) if value is not None]
    if unused:
        raise ConfigError(f"{', '.join(unused)} apply to classification runs; a pose run's int8 export takes "
                          "--calibration-samples and --calibration-data only")
    return mode == "int8"


def _calibration(config, run, size: int):
    """(images [n, S, S, 3] uint8, what the manifest records of them, notes): --calibration-data, or a seeded draw of
    the training split stretched to the input (bilinear, as training resized them)."""
    from PIL import Image

    from pipeline.tasks.pose.data.heldout import training_examples

    wanted = config.calibration_samples or DEFAULT_CALIBRATION_SAMPLES
    if config.calibration_data is not None:
        images, source = read_calibration_npy(config.calibration_data, size), str(config.calibration_data)
    else:
        examples = training_examples(run)
        chosen = np.sort(np.random.default_rng(config.seed).permutation(len(examples))[:wanted])
        shown = []
        for i in chosen:
            with Image.open(io.BytesIO(examples[i].image)) as im:
                shown.append(np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR)))
        images, source = np.stack(shown), "train split of " + run.data.train_spec
    n = min(wanted, len(images))
    notes = [f"calibrating on {n} images: fewer than the {wanted} asked for"] if n < wanted else []
    return images[:n], {"source": source, "samples": int(n), "requested": int(wanted), "seed": config.seed}, notes
