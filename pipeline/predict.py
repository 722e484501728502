"""`pipeline predict`: the run's model on data without labels, written as a Kaggle submission (CSV) or as JSON.

    pipeline predict runs/flowers --data 'tfrecords-jpeg-224x224/test/*.tfrec' --out submission.csv
    pipeline predict runs/flowers --data photos/ --out answers.json --model int8 --top-k 3

--model float (the default): the SavedModel in padded batches under the strategy training would choose
(pipeline/inference/batched.py), the images decoded by training's input pipeline (pipeline/data/decode.py).
--model int8 | edgetpu: the exported TFLite model one image at a time, the images decoded by the pixel
contract (edge.pixels.preprocess): what the device would answer. The output keeps each input's identity and the
input order. An input with no id, a repeated id or an image that cannot be decoded is refused, named, and
nothing is written; with --skip-bad it is left out and listed. The stage only reads the run: it writes --out.
The options are checked here; the run's task predicts (pipeline/tasks/classify/predict.py, detect_predict.py).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, List, NamedTuple, Optional, Tuple

from pipeline.errors import ConfigError
from pipeline.inference import output
from pipeline.rundir.run import Run

MODELS = ("float", "int8", "edgetpu")  # --model: the SavedModel, or a TFLite model as the device runs it


@dataclass(frozen=True)
class PredictConfig:
    data: Tuple[str, ...]  # data specs (unlabeled.py): TFRecord globs, folders of images, image files
    out: str  # the file to write (local)
    model: str = "float"  # float | int8 | edgetpu
    top_k: Optional[int] = None  # add the K best classes' names and scores; None = id and label only (JSON: top 1)
    format: Optional[str] = None  # csv | json; None = json for a .json --out, else csv
    skip_bad: bool = False  # leave out and list the inputs that cannot be predicted, instead of refusing
    batch_size: Optional[int] = None  # float: global batch (None: the task's default, 128 for a classifier)
    tpu: Optional[str] = None  # float: as `pipeline train --tpu` (None = TPU_NAME or no TPU)
    cpu_replicas: Optional[int] = None  # float: MirroredStrategy over N logical CPU devices (testing)
    threads: Optional[int] = None  # int8 | edgetpu: CPU interpreter threads
    workers: Optional[int] = None  # int8 | edgetpu: decode threads beside the interpreter (None = one per core, one fewer on the CPU interpreter)

    def checked(self) -> "PredictConfig":
        if self.model not in MODELS:
            raise ConfigError(f"--model {self.model!r}, expected one of {', '.join(MODELS)}")
        if self.format is not None and self.format not in output.FORMATS:
            raise ConfigError(f"--format {self.format!r}, expected one of {', '.join(output.FORMATS)}")
        if self.out.startswith("gs://"):
            raise ConfigError(f"--out {self.out}: predict writes a local file; write it here and copy it (gsutil cp)")
        if Path(self.out).is_dir():
            raise ConfigError(f"--out {self.out} is a folder; expected a file name such as submission.csv")
        for name in ("top_k", "batch_size", "cpu_replicas", "threads", "workers"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} {value}, expected 1 or more")
        wrong = [f"--{n.replace('_', '-')}" for n in ("batch_size", "tpu", "cpu_replicas") if getattr(self, n) is not None]
        if self.model != "float" and wrong:
            raise ConfigError(f"{', '.join(wrong)} apply to --model float (the batched SavedModel); "
                              f"--model {self.model} runs the TFLite model one image at a time")
        for name in ("threads", "workers"):
            if self.model == "float" and getattr(self, name) is not None:
                raise ConfigError(f"--{name} applies to the TFLite models (--model int8 or edgetpu)")
        return self

    @property
    def out_format(self) -> str:
        return self.format or ("json" if self.out.lower().endswith(".json") else "csv")


class PredictResult(NamedTuple):
    out: Path
    format: str
    written: int  # rows (inputs predicted)
    skipped: List[str]  # with --skip-bad: one line per input left out, saying which and why
    load_seconds: float  # loading the model
    seconds: float  # reading, decoding and scoring the inputs (the throughput's time)
    what: str  # which model answered, and how the images were decoded

    @property
    def images_per_second(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else float("inf")


Progress = Callable[[int, str], ContextManager[Callable[[int], None]]]  # (total, label) -> context giving update(n)


def _no_progress(total: int, label: str) -> ContextManager[Callable[[int], None]]:
    return contextlib.nullcontext(lambda n: None)


def predict_unlabeled(config: PredictConfig, run_dir: Path, say: Callable[[str], None] = print, progress: Progress = _no_progress) -> PredictResult:
    """Predict every input of config.data with the run's model and write config.out. Reads the run, changes nothing in it."""
    from pipeline import tasks

    config = config.checked()
    run = Run.open(run_dir)
    return PredictResult(*tasks.of_run(run).predict(config, run, say, progress))  # pipeline/tasks/<task>_predict.py
