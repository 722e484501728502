"""The evaluation bundle for the device: what `pipeline parity RUN --bundle DIR` writes.

    edge evaluate DIR/model_int8_edgetpu.tflite --data DIR --out predictions.json --edgetpu   (on the device)
    pipeline parity RUN --device-results predictions.json                                    (back here)

This module gathers from the run what the bundle holds (the held-out examples as stored, the labels, the
int8 and Edge TPU models with their entries, the contract they take); its layout, writer and reader are
edge/bundle.py's. It only reads the run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from edge.bundle import ShippedModel, write_bundle as write_bundle_files
from pipeline import tasks
from pipeline.errors import PipelineError
from pipeline.rundir.files import staged_path
from pipeline.rundir.run import Run

DEVICE_MODELS = ("model_int8", "model_int8_edgetpu")  # what a bundle ships, and so what device results may come from


def write_bundle(run_dir: Path, bundle_dir: Path, data: Optional[str] = None) -> Path:
    """The held-out images byte for byte as stored, the labels, the run's int8 and Edge TPU models with their
    sidecars, and a manifest with the models' sha256 and the pixel contract they take, in a new folder."""
    run_dir, bundle_dir = Path(run_dir), Path(bundle_dir)
    if bundle_dir.exists() and any(bundle_dir.iterdir()):
        raise PipelineError(f"bundle folder {bundle_dir} is not empty; expected a new or empty folder")
    run = Run.open(run_dir)
    keys = [key for key in DEVICE_MODELS if run.has(key)]
    if "model_int8" not in keys:
        run.artifact("model_int8")  # raises: run export first
    examples = tasks.of_run(run).bundle_examples(run, data)
    models = {}
    for key in keys:
        if key != "model_int8":
            run.check_compiled_is_current(key)
        models[key] = ShippedModel(run.artifact(key), run.entry(key))
    # The compiled model is the int8 model's twin and takes what it takes.
    contract = run.contract_of("model_int8")
    with staged_path(bundle_dir) as staging:
        write_bundle_files(staging, run.labels, contract, examples, models)
    return bundle_dir
