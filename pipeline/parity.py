"""`pipeline parity`: does the small model answer like the big one, on the same held-out images?

    pipeline parity runs/digits                      float vs int8 on this CPU; exit 1 if the gate fails
    pipeline parity runs/digits --bundle bundle/     held-out images + models to copy to a device
    pipeline parity runs/digits --device-results predictions.json   adds the Edge TPU's answers

Every model sees the held-out images as the device will: the original files, decoded and resized
by the pixel contract (edge.pixels.preprocess). The float SavedModel is the reference. The float TFLite
model (when exported: it is optional, for every task), the int8 model on the CPU interpreter and, when
given, the predictions a device made with `edge evaluate` on the bundle are each compared with it, and so is
the int8 model as each known client feeds it (pipeline/inference/client_scores.py; --clients gates the named
ones like the int8 model). The gate (pipeline/gate.py) applies to the int8 model and to the device, its floor
to the float model too. Reports go to RUN/parity/ whether the gate passes or not.

This module is the one skeleton every task's parity runs (`compare`); what differs, the task's side supplies
(pipeline/tasks/comparison.py, from pipeline/tasks/<task>/parity.py), with the task's own options (its options.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from edge.documents.bundle import image_file
from pipeline import gate, tasks
from pipeline.gate import GATE, GATED, REFERENCE
from pipeline.errors import ConfigError
from pipeline.inference import device_results, device_timing
from pipeline.inference.client_scores import for_task, gate_name
from pipeline.report import write as write_report
from pipeline.rundir.run import writing
from pipeline.tasks import options as task_options

TFLITE = {"float_tflite_cpu": "model_float", "int8_cpu": "model_int8"}  # report row -> the run's artifact
OPTIONAL = ("model_float",)  # reported when exported; the float row is the SavedModel's


@dataclass(frozen=True)
class ParityConfig:
    data: Optional[str] = None  # held-out data spec replacing the run's recorded split
    device_results: Optional[Path] = None  # PREDICTIONS.json written by `edge evaluate` on a device
    device_timing: Optional[Path] = None  # the time per inference written by `edge bench --json` on a device
    max_drop: float = GATE.max_drop  # percentage points of the gate metric (the task's) a gated model may lose
    min_agreement: float = GATE.min_agreement  # share of images whose answer must match the float model's
    min_accuracy: Optional[float] = None  # floor on the task's metric; None = better than chance, as the task words it
    threads: Optional[int] = None  # CPU interpreter threads; None = the interpreter's default
    clients: Tuple[str, ...] = ()  # clients gated like the int8 model (client_scores.parse_clients); the rest are reported
    # the task's own parity options by key (pipeline/tasks/<task>/options.py: a classifier's top_k, gate_metric);
    # given ones, until check_parity fills in the run's task's defaults
    task_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def limits(self) -> gate.GateLimits:
        """The user's limits; the task applies its own options to them (Comparison.limits)."""
        return gate.GateLimits(self.max_drop, self.min_agreement, GATE.metric, self.min_accuracy)

    def validate(self) -> gate.GateLimits:
        """The gate's limits, after refusing an option out of range (ConfigError, like every stage's config)."""
        task_options.check("parity", self.task_options)
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1):
            raise ConfigError(f"--threads {self.threads!r}, expected a whole number >= 1")
        return self.limits.validate()


class ParityResult(NamedTuple):
    report_dir: Path
    report: dict  # what report.json holds
    passed: bool
    failures: List[str]  # one line per failed limit


def check_parity(config: ParityConfig, run_dir: Path) -> ParityResult:
    """Evaluate every model of the run on the held-out images, write RUN/parity/, apply the gate."""
    limits = config.validate()
    with writing(run_dir, "pipeline parity") as run:
        task = tasks.of_run(run)
        config = replace(config, task_options=task_options.for_task(task.name, "parity", config.task_options))
        result = compare(task.comparison(), config, run, limits)
        write_report(run.dir)  # RUN/report.html; a failure to render only warns
    return result


def compare(side, config: ParityConfig, run, limits: gate.GateLimits) -> ParityResult:
    """The skeleton every task's parity runs (pipeline/tasks/comparison.py names the task's steps)."""
    named = for_task(config.clients, side.name)  # "all" expanded; a client this task has none of refused
    held = side.heldout(config, run)
    # model_int8 is required: run.artifact says which command writes it ("run `pipeline export RUN --int8` first").
    paths = {name: run.artifact(key) for name, key in TFLITE.items() if key not in OPTIONAL or run.has(key)}
    device = None
    if config.device_results is not None:
        device = device_results.read(config.device_results, run, side.name, held.ids, held.originals)
    timing = device_timing.read(config.device_timing, run) if config.device_timing is not None else None
    answers = {REFERENCE: side.reference(run, held)}
    opened = {name: side.open(run, TFLITE[name], config) for name in paths}
    for name, model in opened.items():
        answers[name] = side.answers(model, held)
    # The clients on the int8 row's own interpreter: only the feed differs. The files as the bundle ships them.
    files = [image_file(i, example_id, original)[1] for i, (example_id, original) in enumerate(zip(held.ids, held.originals))]
    found, refused = side.clients(opened["int8_cpu"], files)
    if device is not None:
        answers[device.name] = side.device_answers(device, run, held)
    entries = {name: side.entry(held, found_, answers[REFERENCE]) for name, found_ in answers.items()}
    clients = side.client_rows(held, found, refused, entries, answers[REFERENCE], named)
    judged = judge(side, held, limits, entries, clients, refused, named)
    facts = device.facts() if device is not None else None
    report = side.report(config, run, held, entries, clients, facts, judged.gate, answers)
    if timing is not None:  # measured beside predicted (RUN/latency.json too)
        report["device_timing"] = timing.record(run)
    report_dir = side.write(run, report, answers, held, judged.failures)
    report["summary"] = side.summary(report) + device_timing.summary(report.get("device_timing"))  # printed, not written
    return ParityResult(report_dir, report, not judged.failures, judged.failures)


class Judged(NamedTuple):
    failures: List[str]  # one line per failed limit
    gate: dict  # gate.record: the verdict report.json holds


def judge(side, held, limits: gate.GateLimits, entries: Dict[str, dict], clients: Dict[str, dict],
          refused: Dict[str, str], named: Sequence[str]) -> Judged:
    """The gate on the models (`entries`, the reference's among them) and the `named` clients' rows, with the task's
    metrics, its reading of the user's `limits` and its chance floor."""
    limits = side.limits(limits)
    floor = gate.Floor(side.chance(held), limits.min_accuracy, side.metrics[side.floor_metric])
    gated = (*GATED, *(gate_name(c) for c in named))
    scored = {name: side.gate_scores(entry) for name, entry in entries.items()}
    scored.update({gate_name(c): side.gate_scores(clients[c]) for c in named if c not in refused})
    failures = [f"{gate_name(c)}: cannot feed the model: {refused[c]}" for c in named if c in refused]
    failures += gate.check(scored, limits, side.metrics, floor, gated=gated)
    return Judged(failures, gate.record(limits, floor, [*entries, *(gate_name(c) for c in named)], failures, gated))
