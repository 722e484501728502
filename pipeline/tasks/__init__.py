"""What differs between tasks, behind one small interface; the stages stay task-blind.

    task = tasks.get("detect")               # from --task
    task = tasks.of_run(run)                 # a later stage: the task the run was trained for

One module per task (classify.py, detect.py), as pycoral has one adapter per task: opening the data,
the training and held-out datasets, the model and its loss, the held-out scores, what the manifest
records of them, `pipeline prepare`'s writer, and the export, the remedy ladder's tuning, parity's side
(comparison.py) and predict, each in a module of its own beside it (<task>_export.py, <task>_parity.py,
<task>_predict.py). docs/architecture.md says what a new task or a new detector head supplies.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, List, NamedTuple, Optional

from pipeline.errors import ConfigError

NAMES = ("classify", "detect")
DEFAULT = "classify"


class Plan(NamedTuple):
    """The data side of a training run, resolved and checked before any training starts."""

    train_source: Any  # the task's source: labels, examples, describe()
    val_source: Optional[Any]
    split: Any  # pipeline.data.Split: the held-out fraction and seed
    train: Any  # tf.data.Dataset: training examples, unbatched, before augmentation (cacheable)
    train_count: int
    heldout: Any  # tf.data.Dataset: held-out examples, unbatched, as validation reads them
    heldout_count: int
    feed: Dict[str, object]  # whether the decoded training set is cached in memory
    steps_per_epoch: int


class Evaluation(NamedTuple):
    """Held-out scores after training, as the manifest records them under `metrics`."""

    metrics: Dict[str, Any]  # "heldout" and the task's other entries
    line: str  # printed at the end of training
    artifacts: Dict[str, Any]  # extra run files: key -> bytes or a folder path, written with the models


class Exported(NamedTuple):
    """What a task's own export wrote (the parts of the export stage's result a caller reads)."""

    model_path: Any  # Path of the .tflite inside RUN
    sidecar_path: Any  # its <model>.json
    table: str  # the short report printed
    notes: tuple = ()
    failures: tuple = ()  # --remedy: the gate's message when no remedy passed (the best attempt was written)
    remedy: Optional[dict] = None  # --remedy: the ladder's record (every attempt), as the manifest holds it


class Task:
    """The interface. Every method is what one stage needs from the task; nothing here is called with a task test."""

    name: str
    default_data: str  # what `pipeline run` trains on when no --data is given
    train_defaults: Dict[str, Any] = {}  # TrainConfig fields (and "schedule" fields) when not given
    # The report.html section that shows the task's parity: the shared "parity" section (classification's
    # tables and confusion matrices), or the key of the task's own section, which then holds its parity too.
    report_parity_section: str = "parity"

    def check(self, config) -> None:
        """Refuse options the task cannot honour (ConfigError), before anything is read."""

    def default_image_size(self, model: str) -> int:
        raise NotImplementedError

    def plan(self, config, chosen) -> Plan:
        raise NotImplementedError

    def build(self, config, num_classes: int):
        """models.Built (model, base, weights) under the caller's strategy scope."""
        raise NotImplementedError

    def compile_options(self) -> Dict[str, Any]:
        """loss and metrics for model.compile (none when the model's train_step has its own)."""
        raise NotImplementedError

    def training_batches(self, train, config, seed: int):
        """Shuffled, repeated, augmented, batched with drop_remainder, from the plan's `train`."""
        raise NotImplementedError

    def eval_batches(self, heldout, batch_size: int):
        raise NotImplementedError

    def evaluate(self, model, plan: Plan, config, history: List[dict]) -> Evaluation:
        raise NotImplementedError

    def record(self, config, plan: Plan, model, weights) -> Dict[str, Any]:
        """The manifest's model, preprocessing, labels and data entries."""
        raise NotImplementedError

    def saved(self, model):
        """The Keras model to save (the trained one, or the same layers without training-only parts)."""
        return model

    def export(self, config, run):
        """`pipeline export` of `run` (a Run, locked for writing) as config (pipeline/export.py's ExportConfig) asks:
        convert, verify, write the model, its sidecar and manifest entry; returns what was written (the stage's
        ExportResult, or an Exported)."""
        raise NotImplementedError

    def tuning(self):
        """The remedy ladder's view of the task (pipeline/remedy/ladder.py's TuningTask): its tuning split drawn from
        the training data, how the reference and a candidate model are scored on it by the gate's metrics, the
        limits as its parity gate reads them, and the rungs that do not apply to it."""
        raise NotImplementedError

    def comparison(self):
        """The task's side of `pipeline parity` (pipeline/tasks/comparison.py's Comparison, a fresh one per call):
        what pipeline/parity.py's one skeleton asks of the task."""
        raise NotImplementedError

    def predict(self, config, run, say, progress):
        """`pipeline predict` of `run` (read only): writes config.out and returns the fields of the stage's
        PredictResult, in order."""
        raise NotImplementedError

    def end_summary(self, run, result) -> List[str]:
        """The lines `pipeline run` ends with, after parity's `result` (pipeline/inference/summary.py)."""
        raise NotImplementedError

    def bundle_examples(self, run, data):
        """The held-out examples a device bundle ships, as (id, label or None, the stored bytes): `data` is
        `pipeline parity --bundle`'s --data, None for the recorded held-out split."""
        raise NotImplementedError

    def importer(self):
        """`pipeline import`'s steps for a model of this task (pipeline/importing/task_import.py's TaskImport)."""
        raise ConfigError(f"--task {self.name}: pipeline import takes no model for this task")

    def prepare(self, config, source: str, out: str):
        """`pipeline prepare`: write `source` as TFRecord shards and labels.txt into `out`; returns a
        PrepareResult (pipeline/tasks/classify/shards.py)."""
        raise NotImplementedError


_MODULES: Dict[str, str] = {"classify": "pipeline.tasks.classify.task", "detect": "pipeline.tasks.detect.task"}
_LOADED: Dict[str, Task] = {}


def get(name: str) -> Task:
    if name not in _MODULES:
        raise ConfigError(f"unknown task {name!r}; expected one of {', '.join(NAMES)}")
    if name not in _LOADED:
        _LOADED[name] = importlib.import_module(_MODULES[name]).TASK
    return _LOADED[name]


def option(name: str) -> str:
    """` --task NAME` as a command line says it: nothing for the default task."""
    return "" if name == DEFAULT else f" --task {name}"


def of_run(run) -> Task:
    """The task `run` (a pipeline.rundir Run) was trained for."""
    if run.task not in _MODULES:
        from pipeline.errors import ManifestError

        raise ManifestError(f"the run records task {run.task!r}; expected one of {', '.join(NAMES)}")
    return get(run.task)
