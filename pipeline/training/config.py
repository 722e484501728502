"""What `pipeline train` is asked to do: TrainConfig, checked, from options or a JSON file of options.

    config = config_from_options({"data": "digits", "epochs": 3}, schedule={})
"""
from __future__ import annotations

import json
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple

from pipeline import tasks
from pipeline.errors import ConfigError
from pipeline.training.schedule import WarmupSchedule


class Flag(NamedTuple):
    """How `pipeline train` offers a TrainConfig field (the field's metadata["flag"])."""
    name: str  # the option, e.g. "--epochs"
    help: Any  # the help text, or a function returning it (words each task gives: _tasks_say)
    type: Any = None  # click type, or a function returning one; None = the field's annotated type
    to_config: Optional[Callable[[Any], Any]] = None  # the given value as the field's; None = as it is


def option(default=MISSING, *, flag: Optional[Flag] = None, resume: bool = False, default_factory=MISSING,
           before=MISSING):
    """A TrainConfig field with what the rest of the code derives from it: `flag`, the command-line option (None:
    a config file's key only); `resume`, whether a run may resume only with the value it started with (anything
    that changes the model or the data); `before`, the value a run saved before the field existed behaved as
    (default: `default`)."""
    return field(default=default, default_factory=default_factory,
                 metadata={"flag": flag, "resume": resume, "before": default if before is MISSING else before})


def _click():
    import click  # the command line's: a config built in code needs none

    return click


def _task_choice():
    return _click().Choice(tasks.NAMES)


def _tasks_say(lead: str, attribute: str, joined: Callable[[str, str], str], sep: str):
    """A help text of what each task's options.py says (its `attribute`), after `lead`: the tasks word their own data
    specs and what they learn, so that a new task is a folder and this text names none."""
    def help_text() -> str:
        from pipeline.tasks.options import said

        return lead + sep.join(joined(name, words) for name, words in said(attribute))

    return help_text


@dataclass(frozen=True)
class TrainConfig:
    # data spec: digits | TFRecord glob | folder of class folders
    data: str = option(resume=True, flag=Flag(
        "--data", _tasks_say("", "DATA_HELP", lambda name, words: f"{name}: {words}", "; ")))
    # held-out data spec; None = a seeded split of `data`
    val_data: Optional[str] = option(None, resume=True, flag=Flag(
        "--val-data", "held-out data spec; default: a seeded 20% split of --data"))
    # folders searched in order, after the JSON's own, for COCO file_names (of --data and --val-data); None = none
    images: Optional[Tuple[str, ...]] = option(None, resume=True, flag=Flag(
        "--images", "COCO data: a folder the annotations' file_names are relative to, searched after the JSON's "
        "own; repeat for more, searched in order (COCO 2017: --images train2017 --images val2017)",
        to_config=lambda given: tuple(given) or None))
    # a name from models.MODEL_NAMES
    model: str = option("small_cnn", resume=True, flag=Flag(
        "--model", "small_cnn | mobilenet_v2 | mobilenet_v3_small | mobilenet_v3_large | efficientnet_b0 | xception"))
    # square input size; None = the model's default
    image_size: Optional[int] = option(None, resume=True, flag=Flag("--image-size", "square input size; default: the model's"))
    # builder options, e.g. (("alpha", 0.35),)
    model_options: Tuple[Tuple[str, float], ...] = option((), resume=True, flag=Flag(
        "--alpha", "MobileNetV2 width multiplier", float, lambda alpha: (("alpha", alpha),)))
    # 'imagenet' (Keras' loader and cache) or a local weights file
    weights: Optional[str] = option(None, resume=True, flag=Flag(
        "--weights", "'imagenet' (Keras' loader, cache ~/.keras/models) or a local weights file",
        lambda: _click().Path(dir_okay=False)))
    # first epochs train only the head on the frozen pretrained base (pipeline/training/transfer.py)
    frozen_epochs: int = option(0, resume=True, flag=Flag(
        "--frozen-epochs", "first N epochs train only the head on the frozen pretrained base"))
    # after them, unfreeze the base from this layer on; None = all of it
    unfreeze_from: Optional[str] = option(None, resume=True, flag=Flag(
        "--unfreeze-from", "after the frozen epochs, unfreeze the base from this layer on (default: all of it)"))
    # decoded training sets up to this many MB are kept in memory after the first epoch
    cache_mb: int = option(2048, flag=Flag(
        "--cache-mb", "keep the decoded training set in memory when it fits this many MB (0: never)"))
    # after them, a constant low rate, as Keras' transfer-learning guide uses
    fine_tune_learning_rate: float = option(1e-5, resume=True, flag=Flag(
        "--fine-tune-learning-rate", "learning rate after the frozen epochs"))
    # total epochs, resumed runs included
    epochs: int = option(10, flag=Flag("--epochs", "total epochs"))
    # global batch, split evenly across replicas
    batch_size: int = option(32, resume=True, flag=Flag("--batch-size", "global batch, split across replicas"))
    # learning rate per epoch; its options are WarmupSchedule's fields'
    schedule: WarmupSchedule = option(default_factory=WarmupSchedule)
    # None = 8 on TPU, 1 elsewhere
    steps_per_execution: Optional[int] = option(None, flag=Flag(
        "--steps-per-execution", "steps per host round trip (default 8 on TPU, else 1)"))
    # TPU name, 'local' or grpc://host:port; None = TPU_NAME or no TPU
    tpu: Optional[str] = option(None, flag=Flag("--tpu", "TPU name, 'local' (TPU VM) or grpc://host:8470; default: $TPU_NAME"))
    # >1: MirroredStrategy over logical CPU devices (testing distribution)
    cpu_replicas: int = option(1, flag=Flag("--cpu-replicas", "split the CPU into N devices under MirroredStrategy (testing)"))
    # seeds weights, shuffling and the held-out split
    seed: int = option(1234, resume=True, flag=Flag("--seed", "seed for weights, shuffling and the held-out split"))
    # share held out when no val_data is given (a config file's key only)
    heldout_fraction: float = option(0.2, resume=True)
    # classify: share of the training data set aside before training for the remedy ladder to judge int8 models on
    # (0 = none). Detection sets none aside (its ladder draws from the training split).
    tuning_fraction: float = option(0.1, resume=True, before=0.0, flag=Flag(
        "--tuning-fraction", "classify: share of --data set aside for `export --remedy` to judge int8 models on "
        "(default 0.1; parity says when a larger one is needed)"))
    # insist on resuming (a run with saved state resumes anyway)
    resume: bool = option(False, flag=Flag(
        "--resume", "continue an interrupted run (a run with saved state resumes anyway)"))
    # TensorBoard event files in RUN/logs (the chief only)
    tensorboard: bool = option(True, flag=Flag(
        "--no-tensorboard", "write no TensorBoard event files (default: RUN/logs)", to_config=lambda given: False))
    # fit training images to the input as the known clients do (pipeline/data/client_fits.py)
    # None = decided from the data: on when the training images are enlarged to the input (client_fits.decide)
    client_fits: Optional[bool] = option(None, flag=Flag(
        "--client-fits/--no-client-fits", "fit each training image to the input as one of the known clients would (their "
        "filters) instead of by the pixel contract alone; default: on when most training images are smaller than the input"))
    # what the model learns: a task of pipeline/tasks/
    task: str = option(tasks.DEFAULT, resume=True, flag=Flag(
        "--task", _tasks_say("what the model learns: ", "LEARNS", lambda name, words: f"{name} ({words})", ", "), _task_choice))
    # the task's own train options by key (pipeline/tasks/<task>/options.py), given ones only; read as attributes
    # (config.max_boxes), with the task's defaults where not given. Each must match for a run to resume.
    task_options: Mapping[str, Any] = option(default_factory=dict)

    def __getattr__(self, name: str):
        """A task option of this config's task, as if it were a field (only for names that are not fields)."""
        if name.startswith("__") or name in ("task", "task_options"):
            raise AttributeError(name)
        values = self.task_values()
        if name not in values:
            raise AttributeError(f"{type(self).__name__} of task {self.task!r} has no option {name!r}")
        return values[name]

    def task_values(self) -> Dict[str, Any]:
        """The task's train options: those given, its defaults for the rest."""
        from pipeline.tasks import options

        if self.task not in tasks.names():
            return {}
        return {o.key: self.task_options.get(o.key, o.default) for o in options.of_task(self.task, "train")}

    def validate(self) -> "TrainConfig":
        import models

        for name, kind in field_kinds().items():
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) != (kind is bool) or not isinstance(value, kind)):
                raise ConfigError(f"{name} {value!r}, expected {_KIND_NAMES[kind]}")
        from pipeline.tasks import options

        task = tasks.get(self.task)
        if not isinstance(self.task_options, Mapping):
            raise ConfigError(f"task_options {self.task_options!r}, expected an object of the task's options")
        options.for_task(self.task, "train", self.task_options)  # another task's refused, the task's own checked
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
        if self.images is not None and not (isinstance(self.images, (tuple, list)) and self.images
                                            and all(isinstance(p, str) and p for p in self.images)):
            raise ConfigError(f"images {self.images!r}, expected a list of one or more folders")
        if self.cache_mb < 0:
            raise ConfigError(f"cache_mb {self.cache_mb}, expected a size in MB, 0 or more (0: never cache)")
        if self.tensorboard:
            _check_tensorboard_installed()
        if not self.fine_tune_learning_rate > 0:
            raise ConfigError(f"fine_tune_learning_rate {self.fine_tune_learning_rate}, expected a positive rate")
        if not 0 < self.heldout_fraction < 1:
            raise ConfigError(f"heldout_fraction {self.heldout_fraction}, expected a fraction in (0, 1)")
        if not 0 <= self.tuning_fraction < 1:
            raise ConfigError(f"tuning_fraction {self.tuning_fraction}, expected a fraction in [0, 1)")
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
        return self.image_size or tasks.get(self.task).default_image_size(self.model)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(d.pop("task_options"), **self.task_values())  # as the manifest recorded them before they were the task's
        d["model_options"] = dict(self.model_options)
        d["images"] = list(self.images) if self.images is not None else None  # as JSON gives it back, for resume
        d["image_size"] = self.size
        return d


RESUME_KEYS = tuple(f.name for f in fields(TrainConfig) if f.metadata["resume"])  # must match for a run to resume
FLAGS = {f.name: f.metadata["flag"] for f in fields(TrainConfig) if f.metadata["flag"]}  # field -> its option


def resume_keys(config: TrainConfig) -> Tuple[str, ...]:
    """What must match for `config`'s run to resume: RESUME_KEYS and the task's own options."""
    return RESUME_KEYS + tuple(config.task_values())


def _task_option_keys() -> set:
    """Every task's train option keys: given on the command line or in a config file, they go to task_options."""
    from pipeline.tasks import options

    return {o.key for o in options.declared("train")}
_KINDS = {str: str, int: int, float: (int, float), bool: bool}  # a whole number is a float's value too
_KIND_NAMES = {str: "a string", int: "a whole number", (int, float): "a number", bool: "true or false"}


def shown_default(name: str) -> Optional[str]:
    """`--help`'s default for a TrainConfig field (or "schedule.FIELD"), from the one place it is written: the field's
    default, with each task's own where its train_defaults differ ("10 (detect: 12)"); None when there is nothing to
    show (no default value, or a flag's on/off)."""
    schedule = name.startswith("schedule.")
    key = name[len("schedule."):] if schedule else name
    owner = WarmupSchedule if schedule else TrainConfig
    default = next(f.default for f in fields(owner) if f.name == key)
    if default is MISSING or default is None or isinstance(default, bool) or default == ():
        return None
    others = []
    for task in tasks.names():
        given = tasks.train_defaults_of(task)
        value = (given.get("schedule") or {}).get(key) if schedule else given.get(key)
        if value is not None and value != default:
            others.append(f"{task}: {value:g}" if isinstance(value, float) else f"{task}: {value}")
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    return shown + (f" ({', '.join(others)})" if others else "")


def field_kinds() -> Dict[str, Any]:
    """What each plain field must hold, from its annotation: a config file can put any JSON value anywhere
    ("epochs": "ten"). Fields of other types (model options, the schedule) are checked where they are built."""
    kinds = {}
    for name, annotation in typing.get_type_hints(TrainConfig).items():
        if plain_type(annotation) in _KINDS:
            kinds[name] = _KINDS[plain_type(annotation)]
    return kinds


def plain_type(annotation):
    """Optional[X] as X; any other annotation as it is."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if typing.get_origin(annotation) is typing.Union and len(args) == 1 else annotation


def _check_tensorboard_installed() -> None:
    """tf.summary writes nothing without the tensorboard package (TBNotInstalledError at the first epoch): say so
    before training (and before TensorFlow loads)."""
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise ConfigError("TensorBoard event files need the tensorboard package, which TensorFlow 2.21 does not bring: "
                          "pip install tensorboard==2.21.0 (part of the host extra), or train with --no-tensorboard")


def config_from_flags(given: Dict, config_file: Optional[Path] = None) -> TrainConfig:
    """The TrainConfig `pipeline train`'s options ask for: `given` holds each field's option's value under the field's
    name and each schedule field's under schedule_FIELD (None = not given), as the command passes them."""
    given = dict(given)
    schedule = {k[len("schedule_"):]: given.pop(k) for k in list(given) if k.startswith("schedule_")}
    options = {k: v if v is None or k not in FLAGS or FLAGS[k].to_config is None else FLAGS[k].to_config(v)
               for k, v in given.items()}
    return config_from_options(options, schedule, config_file)


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
        task_options = {k: given.pop(k) for k in _task_option_keys() & set(given)}
        defaults = dict(_task_defaults(given.get("task")))
        schedule = {**defaults.pop("schedule", {}), **schedule}
        return TrainConfig(**{**defaults, **given}, schedule=WarmupSchedule(**schedule), task_options=task_options)
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err)) from err


def _task_defaults(task: Optional[str]) -> Dict:
    """The task's own defaults for options not given (none for classify: TrainConfig's are its)."""
    if task is None:
        return {}
    if task not in tasks.names():
        raise ConfigError(f"unknown task {task!r}; expected one of {', '.join(tasks.names())}")
    return tasks.train_defaults_of(task)  # TensorFlow-free: the task's options.py


def config_from_file(path: Path, overrides: Dict) -> TrainConfig:
    """A TrainConfig from a JSON file of TrainConfig fields, with command-line values on top."""
    try:
        values = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read config {path}: {err}; expected a JSON object of train options") from err
    if not isinstance(values, dict):
        raise ConfigError(f"config {path} holds a JSON {type(values).__name__}; expected a JSON object of train options")
    task_keys = _task_option_keys()
    known = {f.name for f in fields(TrainConfig)} - {"task_options"} | task_keys
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
    values["task_options"] = {k: values.pop(k) for k in task_keys & set(values)}
    return TrainConfig(**{**defaults, **values})
