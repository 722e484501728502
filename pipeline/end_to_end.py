"""`pipeline run`: every stage, in order, on one run directory; by default on the built-in digits.

    pipeline run --out runs/digits
    pipeline run --task detect --out runs/shapes      (a detector on the built-in shapes, through the same stages)

train -> export (float32, then int8) -> compile (pre-flight only when edgetpu_compiler is not
installed, and it says so) -> parity. A run directory that already holds a trained model is
reused (the later stages run again on it) only when what was asked (--data, --model, --image-size,
--epochs, each when given) is what the run was trained with; otherwise it is refused, the
differences named. Ends with a summary; exits 1 when the parity gate (pipeline/gate.py) fails, and
with --require-full-mapping when not every op is shown on the Edge TPU (checked at the end: parity still runs).
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Mapping, Optional, Tuple

from pipeline import tasks
from pipeline.errors import ConfigError, PipelineError
from pipeline.gate import FAILED, GATE, GateLimits
from pipeline.rundir import lock
from pipeline.rundir.run import Run, artifact
from pipeline.tasks import options as task_options

DEFAULT_MODEL = "small_cnn"


def _task(config: RunConfig) -> tasks.Task:
    return tasks.get(config.task or tasks.DEFAULT)


@dataclass(frozen=True)
class RunConfig:
    task: Optional[str] = None  # a task of pipeline/tasks; None = tasks.DEFAULT (or, reusing a run, whichever it has)
    data: Optional[str] = None  # data spec for training (and its held-out split for parity); None = the task's built-in
    images: Tuple[str, ...] = ()  # detect, COCO data: folders its file names are also looked for in (train's --images)
    model: Optional[str] = None  # registry model; None = small_cnn (or, reusing a run, whichever it has)
    image_size: Optional[int] = None  # None = the model's default
    epochs: Optional[int] = None  # None = train's default
    max_drop: float = GATE.max_drop  # parity gate: allowed top-1 drop of int8 vs float, percentage points
    min_agreement: float = GATE.min_agreement  # parity gate: required top-1 agreement with the float model
    min_accuracy: Optional[float] = None  # parity gate: top-1 floor; None = better than the majority class
    remedy: bool = False  # int8 export: the remedy ladder when the model fails the gate on a tuning split
    clients: Tuple[str, ...] = ()  # parity gate: clients gated like the int8 model (the rest are reported)
    require_full_mapping: bool = False  # exit 1 at the end when not every op is shown on the Edge TPU (after parity)
    # the task's own options of `pipeline run` by key (pipeline/tasks/<task>/options.py: a classifier's gate_metric,
    # a detector's head), given ones
    task_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def limits(self) -> GateLimits:
        """The user's limits; the task applies its own options to them (Task.gate_limits)."""
        return GateLimits(self.max_drop, self.min_agreement, GATE.metric, self.min_accuracy)


def default_run_dir(config: RunConfig) -> Path:
    data, model = config.data or _task(config).default_data, config.model or DEFAULT_MODEL
    builtin = data == _task(config).default_data
    name = data if builtin else re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(data.rstrip("/*")).name) or "data"
    return Path("runs") / f"{name}-{model}"


def reuse_differences(config: RunConfig, run: Run) -> List[str]:
    """What was asked (options given, None = not given) that the trained `run` differs in."""
    recorded = {"task": run.task, "data": run.data.train_spec, "images": run.data.images, "model": run.model.name,
                "image_size": run.model.image_size, "epochs": run.training.epochs}
    asked = {"task": config.task, "data": config.data, "images": tuple(config.images) or None, "model": config.model,
             "image_size": config.image_size, "epochs": config.epochs}
    return [f"--{key.replace('_', '-')} {_shown(asked[key])} (the run has {_shown(recorded[key])})"
            for key in asked if asked[key] is not None and asked[key] != recorded[key]]


def _shown(value) -> str:
    """An option's value as a user types it: a repeated option's values separated by spaces, 'none' for none."""
    return (" ".join(value) or "none") if isinstance(value, tuple) else str(value)


def run_all(config: RunConfig, run_dir: Path, say=print):
    """All stages, holding the run's lock from the first to the last; returns the parity result (its
    .passed tells whether the gate held)."""
    from pipeline import compile as compile_mod
    from pipeline import export, parity

    run_dir = Path(run_dir)
    limits = config.limits.validate()  # before minutes of training, not after
    task_options.check("run", config.task_options)
    if not (run_dir / artifact("manifest").name).exists():
        _train_config(config).validate()  # refused options leave no run folder behind (its lock file would stay)
        from pipeline.inference.client_scores import for_task

        for_task(config.clients, _task(config).name)  # a client the task has none of: refused before training
    with lock.hold(run_dir, "pipeline run"):
        _train_or_reuse(config, run_dir, say)
        task = tasks.of_run(Run.open(run_dir))
        options = task_options.for_task(task.name, "run", config.task_options)
        limits = task.gate_limits(limits, options)
        say("== export float32")
        exported = export.export_model(export.ExportConfig(mode=export.Mode.FLOAT32), run_dir)
        say(exported.table + "".join(f"\nnote: {note}" for note in exported.notes))
        say("== export int8")
        exported = export.export_model(export.ExportConfig(mode=export.Mode.INT8, repair=config.remedy, gate=limits,
                                                           clients=config.clients if config.remedy else ()), run_dir)
        say(exported.table + "".join(f"\nnote: {note}" for note in exported.notes))
        remedy_failures = list(exported.failures)  # nothing passed: the best attempt goes on, and the run exits 1
        compiler = shutil.which("edgetpu_compiler")
        say("== compile" if compiler else "== compile: edgetpu_compiler is not installed here, so pre-flight analysis only")
        # The mapping gate is applied at the end, like the parity gate: parity still runs and the report is whole.
        unmapped = compile_mod.compile_for_edgetpu(compile_mod.CompileConfig(check_only=compiler is None), run_dir).unmapped
        say("== parity")
        given = {o.key: options[o.key] for o in task_options.of_task(task.name, "parity") if options.get(o.key) is not None}
        result = parity.check_parity(parity.ParityConfig(max_drop=limits.max_drop, min_agreement=limits.min_agreement,
                                                         min_accuracy=limits.min_accuracy, clients=config.clients,
                                                         task_options=given), run_dir)
    run = Run.open(run_dir)
    for line in tasks.of_run(run).end_summary(run, result):
        say(line)
    if remedy_failures:
        result = result._replace(passed=False, failures=remedy_failures + list(result.failures))
    if config.require_full_mapping and unmapped:
        failed = "" if result.passed else f"; the {FAILED} too: {'; '.join(result.failures)}"
        raise PipelineError(f"--require-full-mapping: {unmapped}{failed}")
    return result


def _train_config(config: RunConfig):
    """What `pipeline train` is asked when `pipeline run` trains."""
    from pipeline.training.config import config_from_options

    task = _task(config)
    train_keys = {o.key for o in task_options.of_task(task.name, "train")}
    options = {"image_size": config.image_size, "epochs": config.epochs, "images": tuple(config.images) or None,
               "task": task.name, "data": config.data or task.default_data, "model": config.model or DEFAULT_MODEL,
               **{k: v for k, v in task_options.for_task(task.name, "run", config.task_options).items() if k in train_keys}}
    if config.data is None and config.model is None:
        options["model_options"] = task.builtin_model_options
    return config_from_options(options, schedule={})


def _train_or_reuse(config: RunConfig, run_dir: Path, say) -> None:
    if not (run_dir / artifact("manifest").name).exists():
        from pipeline import train  # TensorFlow: a reused run that differs from what was asked is refused without it

        say("== train")
        train.train_model(_train_config(config), run_dir)
        return
    trained = Run.open(run_dir)
    differences = reuse_differences(config, trained)
    if differences:
        raise ConfigError(
            f"{run_dir} already holds a trained run that differs from what was asked: {'; '.join(differences)}. "
            f"Nothing was changed; choose a new --out to train what was asked, or leave those options out to reuse this run"
        )
    say(f"== train: {run_dir} already holds a trained {trained.model.name} "
        f"({trained.model.image_size}px, {trained.training.epochs} epochs on {trained.data.train_spec}); reusing it")
