"""The evaluation bundle for the device: what `pipeline parity RUN --bundle DIR` writes.

    edge evaluate DIR/model_int8_edgetpu.tflite --data DIR --out predictions.json --edgetpu   (on the device)
    pipeline parity RUN --device-results predictions.json                                    (back here)

This module gathers from the run what the bundle holds (the held-out examples as stored, the labels, the
int8 and Edge TPU models with their entries, the contract they take); its layout, writer and reader are
edge/documents/bundle.py's. It only reads the run.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from edge.files.atomic import fsync_dir
from edge.documents.bundle import ShippedModel, write_bundle as write_bundle_files
from pipeline import tasks
from pipeline.errors import PipelineError
from pipeline.rundir.files import fsync_tree, scratch_folder
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
    bundle_dir.parent.mkdir(parents=True, exist_ok=True)
    with scratch_folder(bundle_dir.parent, prefix=f".{bundle_dir.name}.") as scratch:
        staging = scratch / bundle_dir.name
        write_bundle_files(staging, run.labels, contract, examples, models)
        fsync_tree(staging)
        _move_in(staging, bundle_dir)
    return bundle_dir


def _move_in(staging: Path, bundle_dir: Path) -> None:
    """Rename the staged bundle onto `bundle_dir`, which may only be an empty folder: what appeared in it while the
    bundle was written is someone else's, kept, and the bundle is refused (never moved aside and deleted)."""
    if bundle_dir.is_dir() and not bundle_dir.is_symlink():
        try:
            bundle_dir.rmdir()
        except OSError:
            raise PipelineError(f"bundle folder {bundle_dir} filled up while the bundle was written; its files were left "
                                "as they are and no bundle was written: choose a new or empty folder") from None
    try:
        os.rename(staging, bundle_dir)  # not os.replace: it must not land on anything that appeared meanwhile
    except OSError as err:
        raise PipelineError(f"bundle folder {bundle_dir} appeared while the bundle was written ({err.strerror}); "
                            "it was left as it is and no bundle was written: choose a new or empty folder") from None
    fsync_dir(bundle_dir.parent)
