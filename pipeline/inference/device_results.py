"""What a device's results file (`edge evaluate` on a run's bundle) must answer for, checked once for every task:
from this run's task, from a model the bundle shipped (by sha256; a compiled one still current), one prediction
per held-out image, in order, each for the image's own bytes (sha256 of the file the bundle shipped).

    checked = device_results.read(path, run, "detect", ids, originals)
    checked.model_key, checked.results.predictions[i]      # the task reads its own answers from each prediction

What each prediction holds (a classifier's scores, a detector's objects) is the task's to check.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Sequence

from edge.documents.bundle import image_file
from edge.model.integrity import sha256_bytes
from edge.documents.predictions import Predictions, read_predictions
from pipeline.errors import DataError
from pipeline.inference.bundle import DEVICE_MODELS

ANSWERS = {"classify": "a classifier's scores", "detect": "a detector's objects"}  # what each task's document holds


class Checked(NamedTuple):
    path: Path
    results: Predictions  # edge.documents.predictions' reading of the document
    model_key: str  # the run's artifact the device ran

    def facts(self) -> dict:
        """What parity/report.json records of the device: the file, the model, its backend."""
        return {"file": str(self.path), "model": self.model_key, "backend": self.results.backend,
                "edgetpu": self.results.edgetpu}

    @property
    def name(self) -> str:
        """The device's row in the report: its Edge TPU, or its CPU interpreter."""
        return "edgetpu" if self.results.edgetpu else "device_cpu"


def read(path: Path, run, task_name: str, ids: Sequence[str], originals: Sequence[bytes]) -> Checked:
    """`path` read and checked against `run`'s bundle: the held-out examples' ids and stored bytes, in order."""
    path = Path(path)
    results = read_predictions(path)  # the document's form; what it answers for is checked here
    if task_name != results.task:
        raise DataError(f"device results {path} hold {ANSWERS[results.task]}; expected {ANSWERS[task_name]} from `edge "
                        "evaluate` of this run's int8 model on its bundle (`pipeline parity RUN --bundle DIR`)")
    shipped = {run.entry(key)["sha256"]: key for key in DEVICE_MODELS if run.has(key)}
    model_key = shipped.get(results.model_sha256)
    if model_key is None:
        raise DataError(f"device results {path} come from a model (sha256 {str(results.model_sha256)[:12]}…) that is "
                        f"not this run's {' or '.join(DEVICE_MODELS)}; expected `edge evaluate` of a model from this run's bundle")
    if len(results.predictions) != len(ids):
        raise DataError(f"device results {path} hold {len(results.predictions)} predictions, the held-out split has "
                        f"{len(ids)} images; expected `edge evaluate` on the bundle from `pipeline parity RUN --bundle DIR`")
    if model_key != "model_int8":
        run.check_compiled_is_current(model_key)
    for i, (p, example_id, original) in enumerate(zip(results.predictions, ids, originals)):
        if p.id != example_id:
            raise DataError(f"device result {i} is for example {p.id!r}, held-out image {i} is {example_id!r}: "
                            "the device evaluated other images (or an older bundle)")
        expected = sha256_bytes(image_file(i, example_id, original)[1])
        if p.sha256 != expected:
            raise DataError(f"device result {i} ({example_id}) is for an image with sha256 {str(p.sha256)[:12]}…, this "
                            f"run's held-out image is {expected[:12]}…: the device evaluated other bytes (or results of an "
                            "earlier edge, which recorded none); run `edge evaluate` on a new bundle")
    return Checked(path, results, model_key)
