"""What `pipeline train` is asked to do: TrainConfig, checked, from options or a JSON file of options.

    config = config_from_options({"data": "digits", "epochs": 3}, schedule={})
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Dict, Optional, Tuple

import models
from pipeline.data.feed import DEFAULT_CACHE_MB
from pipeline.errors import ConfigError
from pipeline.training import logs as train_logs
from pipeline.training.schedule import WarmupSchedule


@dataclass(frozen=True)
class TrainConfig:
    data: str  # data spec: digits | TFRecord glob | folder of class folders
    val_data: Optional[str] = None  # held-out data spec; None = a seeded split of `data`
    model: str = "small_cnn"  # a name from models.MODEL_NAMES
    image_size: Optional[int] = None  # square input size; None = the model's default
    model_options: Tuple[Tuple[str, float], ...] = ()  # builder options, e.g. (("alpha", 0.35),)
    weights: Optional[str] = None  # 'imagenet' (Keras' loader and cache) or a local weights file
    frozen_epochs: int = 0  # first epochs train only the head on the frozen pretrained base (pipeline/training/transfer.py)
    unfreeze_from: Optional[str] = None  # after them, unfreeze the base from this layer on; None = all of it
    cache_mb: int = DEFAULT_CACHE_MB  # memory budget for keeping the decoded training set after epoch 1
    fine_tune_learning_rate: float = 1e-5  # after them, a constant low rate, as Keras' transfer-learning guide uses
    epochs: int = 10  # total epochs, resumed runs included
    batch_size: int = 32  # global batch, split evenly across replicas
    schedule: WarmupSchedule = field(default_factory=WarmupSchedule)  # learning rate per epoch
    steps_per_execution: Optional[int] = None  # None = 8 on TPU, 1 elsewhere
    tpu: Optional[str] = None  # TPU name, 'local' or grpc://host:port; None = TPU_NAME or no TPU
    cpu_replicas: int = 1  # >1: MirroredStrategy over logical CPU devices (testing distribution)
    seed: int = 1234  # seeds weights, shuffling and the held-out split
    heldout_fraction: float = 0.2  # share held out when no val_data is given
    resume: bool = False  # insist on resuming (a run with saved state resumes anyway)
    tensorboard: bool = True  # TensorBoard event files in RUN/logs (the chief only)
    client_fits: bool = False  # fit training images to the input as the known clients do (pipeline/data/client_fits.py)
    task: str = "classify"  # what the model learns: classify | detect (pipeline/tasks/)

    def validate(self) -> "TrainConfig":
        for name, kind in _FIELD_TYPES.items():
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) != (kind is bool) or not isinstance(value, kind)):
                raise ConfigError(f"{name} {value!r}, expected {_KIND_NAMES[kind]}")
        from pipeline import tasks

        task = tasks.get(self.task)
        if self.model not in models.MODEL_NAMES:
            raise ConfigError(f"unknown model {self.model!r}; expected one of {', '.join(models.MODEL_NAMES)}")
        size = self.size
        if size < models.min_image_size(self.model):
            raise ConfigError(f"image size {size} is too small for {self.model}; expected at least {models.min_image_size(self.model)}")
        for name in ("epochs", "batch_size", "cpu_replicas"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} {getattr(self, name)}, expected at least 1")
        if self.steps_per_execution is not None and self.steps_per_execution < 1:
            raise ConfigError(f"steps_per_execution {self.steps_per_execution}, expected at least 1")
        if not 0 <= self.frozen_epochs <= self.epochs:
            raise ConfigError(f"frozen_epochs {self.frozen_epochs}, expected 0..epochs ({self.epochs})")
        if (self.frozen_epochs or self.unfreeze_from) and not self.weights:
            raise ConfigError("--frozen-epochs and --unfreeze-from fine-tune pretrained weights; give --weights "
                              "(imagenet or a local file)")
        if self.unfreeze_from and not self.frozen_epochs:
            raise ConfigError("--unfreeze-from says where to unfreeze after the frozen epochs; give --frozen-epochs N too")
        if self.frozen_epochs and not models.has_base(self.model):
            raise ConfigError(f"{self.model} has no pretrained base network to freeze; expected one of "
                              f"{', '.join(n for n in models.MODEL_NAMES if models.has_base(n))}")
        if self.cache_mb < 0:
            raise ConfigError(f"cache_mb {self.cache_mb}, expected a size in MB, 0 or more (0: never cache)")
        if self.tensorboard:
            train_logs.check_installed()
        if not self.fine_tune_learning_rate > 0:
            raise ConfigError(f"fine_tune_learning_rate {self.fine_tune_learning_rate}, expected a positive rate")
        if not 0 < self.heldout_fraction < 1:
            raise ConfigError(f"heldout_fraction {self.heldout_fraction}, expected a fraction in (0, 1)")
        try:
            models.check_options(self.model, dict(self.model_options))
            if self.weights and self.weights != models.IMAGENET:
                models.check_weights_file(self.weights)
        except (ValueError, OSError) as err:
            raise ConfigError(str(err)) from err
        task.check(self)
        return self

    @property
    def size(self) -> int:
        from pipeline import tasks

        return self.image_size or tasks.get(self.task).default_image_size(self.model)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["model_options"] = dict(self.model_options)
        d["image_size"] = self.size
        return d


# What each field must hold: a config file can put any JSON value anywhere ("epochs": "ten").
_FIELD_TYPES = {"data": str, "val_data": str, "model": str, "image_size": int, "weights": str, "epochs": int,
                "batch_size": int, "steps_per_execution": int, "tpu": str, "cpu_replicas": int, "seed": int,
                "heldout_fraction": (int, float), "resume": bool, "frozen_epochs": int, "unfreeze_from": str,
                "fine_tune_learning_rate": (int, float), "cache_mb": int, "tensorboard": bool,
                "client_fits": bool, "task": str}
_KIND_NAMES = {str: "a string", int: "a whole number", (int, float): "a number", bool: "true or false"}


def config_from_options(options: Dict, schedule: Dict, config_file: Optional[Path] = None) -> TrainConfig:
    """The TrainConfig the command line asks for: a JSON file's fields (when given) with the options on
    top; `schedule` holds the learning-rate options, merged into the file's schedule. None = not given."""
    schedule = {k: v for k, v in schedule.items() if v is not None}
    try:
        if config_file:
            config = config_from_file(config_file, options)
            if schedule:
                config = replace(config, schedule=WarmupSchedule(**{**config.schedule.as_dict(), **schedule}))
            return config
        if not options.get("data"):
            raise ConfigError("no data spec: give --data (for example --data digits) or --config FILE")
        given = {k: v for k, v in options.items() if v is not None}
        defaults = dict(_task_defaults(given.get("task")))
        schedule = {**defaults.pop("schedule", {}), **schedule}
        return TrainConfig(**{**defaults, **given}, schedule=WarmupSchedule(**schedule))
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err)) from err


def _task_defaults(task: Optional[str]) -> Dict:
    """The task's own defaults for options not given (none for classify: TrainConfig's are its)."""
    from pipeline import tasks

    if task is None:
        return {}
    if task not in tasks.NAMES:
        raise ConfigError(f"unknown task {task!r}; expected one of {', '.join(tasks.NAMES)}")
    return tasks.get(task).train_defaults


def config_from_file(path: Path, overrides: Dict) -> TrainConfig:
    """A TrainConfig from a JSON file of TrainConfig fields, with command-line values on top."""
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read config {path}: {err}; expected a JSON object of train options") from err
    if not isinstance(values, dict):
        raise ConfigError(f"config {path} holds a JSON {type(values).__name__}; expected a JSON object of train options")
    known = {f.name for f in fields(TrainConfig)}
    unknown = set(values) - known
    if unknown:
        raise ConfigError(f"config {path} has unknown keys {sorted(unknown)}; expected some of {sorted(known)}")
    for key in ("schedule", "model_options"):
        if key in values and not isinstance(values[key], dict):
            raise ConfigError(f"config {path}: {key!r} is {values[key]!r}; expected a JSON object")
    if "schedule" in values:
        known_schedule = {f.name for f in fields(WarmupSchedule)}
        if set(values["schedule"]) - known_schedule:
            raise ConfigError(f"config {path}: schedule has unknown keys {sorted(set(values['schedule']) - known_schedule)}; "
                              f"expected some of {sorted(known_schedule)}")
    task = overrides.get("task") or values.get("task")
    defaults = dict(_task_defaults(task if isinstance(task, str) else None))
    schedule_defaults = defaults.pop("schedule", {})
    if "schedule" in values or schedule_defaults:
        values["schedule"] = WarmupSchedule(**{**schedule_defaults, **values.get("schedule", {})})
    overrides = {k: v for k, v in overrides.items() if v is not None}
    # --alpha adds to the file's model options rather than replacing all of them.
    options = {**values.get("model_options", {}), **dict(overrides.pop("model_options", ()))}
    if options:
        values["model_options"] = tuple(sorted(options.items()))
    values.update(overrides)
    if "data" not in values:
        raise ConfigError(f"no data spec: give --data or a 'data' key in {path}")
    return TrainConfig(**{**defaults, **values})
