"""What differs between tasks, behind one small interface; the stages stay task-blind.

    task = tasks.get("detect")               # from --task
    task = tasks.of_run(run)                 # a later stage: the task the run was trained for
    tasks.register("count", "my_tasks.count")  # a task package from elsewhere (its task.py holds TASK)

One package per task, as pycoral has one adapter per task: pipeline/tasks/<task>/ with task.py (the Task below:
opening the data, the training and held-out datasets, the model and its loss, the held-out scores, what the
manifest records of them, `pipeline prepare`'s writer) and beside it the task's export, parity side
(comparison.py's Comparison), predict, tuning and its command-line options (options.py). The registry finds the
task packages by looking: every folder of pipeline/tasks/ that holds a task.py is a task, so a new task is a
folder. docs/architecture.md says what a new task or a new detector head supplies.
"""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from pipeline.errors import ConfigError, ManifestError

# Each task's package by name: the folders of pipeline/tasks/ holding a task.py, and those register() adds.
_PACKAGES: Dict[str, str] = {path.parent.name: f"{__name__}.{path.parent.name}"
                             for path in sorted(Path(__file__).parent.glob("*/task.py"))}
NAMES = tuple(_PACKAGES)  # the tasks found here (the command line's choices; names() has registered ones too)
DEFAULT = "classify"  # what --task means when not given, and what a run from before tasks was


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
    # The model options `pipeline run` trains with on default_data and the default model (neither --data nor --model)
    builtin_model_options = None

    @property
    def train_defaults(self) -> Dict[str, Any]:
        """TrainConfig fields (and "schedule" fields) when not given: TRAIN_DEFAULTS of the task's options.py."""
        return train_defaults_of(self.name)

    def check(self, config) -> None:
        """Refuse options the task cannot honour (ConfigError), before anything is read."""

    def input_size_step(self, run) -> int:
        """The steps the input sizes of `run`'s models come in: `pipeline compile`'s cost gates suggest a size of them."""
        return 8

    def size_note(self, size: int) -> str:
        """What the cost gates' advice adds for the programs that run the task's models at a new input size."""
        return ""

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

    def gate_limits(self, limits, options: Dict[str, Any]):
        """The user's gate limits (pipeline/gate.py's GateLimits) with the task's own `pipeline run` options applied, as
        the remedy ladder and parity judge by them."""
        return limits

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

    def report_sections(self) -> Dict[str, Any]:
        """report.html's sections the task words itself: key -> section(run) -> the template's dict (pipeline/report/
        sections.py). "parity" replaces the skeleton's (which says where the task's parity is); another key adds one."""
        return {}

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


_LOADED: Dict[str, Task] = {}


def register(name: str, package: str) -> None:
    """Make the task package `package` (a module path whose task.py holds TASK, and whose options.py, when there is
    one, its command-line options) known as `name`, beside the ones found in pipeline/tasks/."""
    if name in _PACKAGES and _PACKAGES[name] != package:
        raise ConfigError(f"task {name!r} is {_PACKAGES[name]} already; expected a new name for {package}")
    _PACKAGES[name] = package
    _LOADED.pop(name, None)


def unregister(name: str) -> None:
    """Forget a task register() added (one found in pipeline/tasks/ stays)."""
    if name in NAMES:
        raise ConfigError(f"task {name!r} is a folder of pipeline/tasks/; expected a registered one")
    _PACKAGES.pop(name, None)
    _LOADED.pop(name, None)


def names() -> Tuple[str, ...]:
    """Every known task: those found in pipeline/tasks/, then the registered ones."""
    return tuple(_PACKAGES)


def package(name: str) -> str:
    """The module path of task `name`'s package."""
    if name not in _PACKAGES:
        raise ConfigError(f"unknown task {name!r}; expected one of {', '.join(names())}")
    return _PACKAGES[name]


def part(name: str, module: str):
    """Task `name`'s module `module` (its options, its clients), or None when the task has none."""
    full = f"{package(name)}.{module}"
    return importlib.import_module(full) if importlib.util.find_spec(full) is not None else None


def train_defaults_of(name: str) -> Dict[str, Any]:
    """Task `name`'s own defaults for `pipeline train` (TRAIN_DEFAULTS of its options.py, TensorFlow-free so that
    --help shows them without importing the task); {}: TrainConfig's own are its."""
    module = part(name, "options")
    return dict(getattr(module, "TRAIN_DEFAULTS", {})) if module is not None else {}


def get(name: str) -> Task:
    if name not in _LOADED:
        _LOADED[name] = importlib.import_module(f"{package(name)}.task").TASK
    return _LOADED[name]


def option(name: str) -> str:
    """` --task NAME` as a command line says it: nothing for the default task."""
    return "" if name == DEFAULT else f" --task {name}"


def of_run(run) -> Task:
    """The task `run` (a pipeline.rundir Run) was trained for."""
    if run.task not in _PACKAGES:
        raise ManifestError(f"the run records task {run.task!r}; expected one of {', '.join(names())}")
    return get(run.task)
