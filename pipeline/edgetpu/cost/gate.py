"""`pipeline compile --max-latency-ms X` and `--require-on-chip`: refuse a model the cost model predicts too slow, or
whose parameters would not all stay on the chip, and name the change that fits.

For a budget: the largest input size whose predicted time meets it (for a detector, the size to give Frigate as its
model's width and height), else the largest width; for the on-chip gate: the largest width whose parameters all
fit (parameters do not depend on the input size). For a run, the advice is a `pipeline train` command with the run's
own recorded options and the one changed; for a bare .tflite file, the size or width alone.
"""
from __future__ import annotations

import json
import shlex
from typing import Callable, Dict, List, NamedTuple, Optional

from edge.model.tflite_file import ModelInfo

from pipeline import tasks
from pipeline.edgetpu.cost import coefficients
from pipeline.edgetpu.cost.predict import Estimate, estimate_cost
from pipeline.edgetpu.cost.scaling import rescaled

# Width options of the registry's models (models/registry.py) and the values the advice may name, largest first.
# MobileNetV2's alpha: the multipliers Keras ships ImageNet weights for; small_cnn's width: its first layer's filters.
WIDTHS = {"mobilenet_v2": ("alpha", (1.3, 1.0, 0.75, 0.5, 0.35)), "small_cnn": ("width", tuple(range(1024, 7, -8)))}
DEFAULT_WIDTH = {"alpha": 1.0, "width": 16}


class RunFacts(NamedTuple):
    """What the advice needs of a run: where it is and how it was trained (manifest's training.config)."""
    run_dir: str
    train_config: Dict
    min_size: int
    size_step: int = 8  # the task's steps of input size (a detector's: its coarsest stride)
    size_note: Callable[[int], str] = lambda size: ""  # what the task's clients are told of a new size


class Gate(NamedTuple):
    max_latency_ms: Optional[float]
    require_on_chip: bool
    device: str


def input_side(info: ModelInfo) -> Optional[int]:
    """The square image input's side, or None for any other input."""
    if len(info.inputs) != 1:
        return None
    shape = info.tensor(info.inputs[0]).shape
    return int(shape[1]) if len(shape) == 4 and shape[1] == shape[2] else None


def check(gate: Gate, estimate: Estimate, info: ModelInfo, run: Optional[RunFacts] = None) -> Optional[str]:
    """Why the model fails a gate, with the change that fits; None when it passes (or no gate is set)."""
    failures = []
    if gate.max_latency_ms is not None and gate.device in estimate.unpredicted:
        label, why = estimate.unpredicted[gate.device]
        failures.append(f"--max-latency-ms {gate.max_latency_ms:g}: no time is predicted for this model on the {label} "
                        f"({why}); judge it on another device: --latency-device "
                        + " or ".join(t.device for t in estimate.times))
    elif gate.max_latency_ms is not None:
        t = estimate.time(gate.device)
        if t.total_ms > gate.max_latency_ms:
            failures.append(f"--max-latency-ms {gate.max_latency_ms:g}: predicted {t.total_ms:.2f} ms per inference on the "
                            f"{t.label}; " + _latency_advice(gate, estimate, info, run))
    if gate.require_on_chip and not estimate.split.all_cached:
        s = estimate.split
        failures.append(f"--require-on-chip: {s.streamed_bytes / 2**20:.2f} MiB of parameters would be streamed from the "
                        f"host every inference ({s.cached_bytes / 2**20:.2f} MiB cached, on-chip capacity about "
                        f"{s.capacity_bytes / 2**20:.2f} MiB); " + _on_chip_advice(gate, estimate, info, run))
    return "\n".join(failures) or None


def _at(estimate: Estimate, info: ModelInfo, ratio: float = 1.0, width: float = 1.0) -> Estimate:
    decode = estimate.times[0].host_decode_ms * ratio ** 2
    return estimate_cost(rescaled(estimate.cost, info, ratio, width, coefficients.layout()), decode)


def _latency_advice(gate: Gate, estimate: Estimate, info: ModelInfo, run: Optional[RunFacts]) -> str:
    side = input_side(info)
    if side is None:
        return "the model's input is not a square image, so no smaller size can be suggested"
    step = run.size_step if run else 8
    low = run.min_size if run else step
    for s in range(side - step, max(low, step) - 1, -step):
        t = _at(estimate, info, s / side).time(gate.device)
        if t.total_ms <= gate.max_latency_ms:
            return (f"the largest input size that meets it is {s}x{s} (predicted {t.total_ms:.2f} ms)"
                    + _size_note(run, s) + _retrain(run, gate, image_size=s))
    floor = _at(estimate, info, max(low, step) / side).time(gate.device).total_ms
    width = _largest_width(gate, estimate, info, run, lambda e: e.time(gate.device).total_ms <= gate.max_latency_ms)
    if width:
        name, value, e = width
        return (f"no input size meets it (at {max(low, step)}x{max(low, step)}: {floor:.2f} ms); the largest {name} that "
                f"does is {value:g} (predicted {e.time(gate.device).total_ms:.2f} ms)" + _retrain(run, gate, option=(name, value)))
    return (f"no input size down to {max(low, step)}x{max(low, step)} meets it (predicted {floor:.2f} ms there): the "
            "budget is below what this architecture costs; choose a smaller architecture")


def _on_chip_advice(gate: Gate, estimate: Estimate, info: ModelInfo, run: Optional[RunFacts]) -> str:
    fits = lambda e: e.split.all_cached  # noqa: E731
    width = _largest_width(gate, estimate, info, run, fits)
    if width:
        name, value, e = width
        return (f"parameters do not shrink with the input size; the largest {name} whose parameters all fit is {value:g} "
                f"({(e.split.cached_bytes) / 2**20:.2f} MiB predicted)" + _retrain(run, gate, option=(name, value)))
    for k in range(95, 0, -5):  # a bare file, or a model without a width option: the multiplier that would fit
        if fits(_at(estimate, info, width=k / 100)):
            return (f"parameters do not shrink with the input size; a width multiplier of at most {k / 100:g} would fit "
                    "(parameters scale with its square), or choose a model with fewer parameters")
    return "parameters do not shrink with the input size; choose a model with fewer parameters"


def _largest_width(gate: Gate, estimate: Estimate, info: ModelInfo, run: Optional[RunFacts], ok):
    """(option name, value, estimate) of the largest width option below the run's that satisfies `ok`; None without one."""
    if not run or run.train_config.get("model") not in WIDTHS:
        return None
    name, values = WIDTHS[run.train_config["model"]]
    current = float(dict(run.train_config.get("model_options") or {}).get(name, DEFAULT_WIDTH[name]))
    for value in values:
        if value < current:
            e = _at(estimate, info, width=value / current)
            if ok(e):
                return name, value, e
    return None


def _size_note(run: Optional[RunFacts], size: int) -> str:
    return run.size_note(size) if run else ""


def _retrain(run: Optional[RunFacts], gate: Gate, image_size: Optional[int] = None, option=None) -> str:
    """The commands that rebuild the run with one change and check it against the same gate."""
    if not run:
        return "; export the model again at that setting"
    c = run.train_config
    suffix = f"{image_size}px" if image_size else f"{option[0]}{option[1]:g}"
    out = f"{run.run_dir.rstrip('/')}-{suffix}"
    words = ["pipeline", "train"]
    words += tasks.option(c.get("task") or tasks.DEFAULT).split()
    words += ["--data", c["data"]]
    if c.get("val_data"):
        words += ["--val-data", c["val_data"]]
    for image_dir in c.get("images") or ():
        words += ["--images", image_dir]
    words += ["--model", c["model"], "--image-size", str(image_size or c.get("image_size") or "")]
    options = dict(c.get("model_options") or {})
    if option:
        options[option[0]] = option[1]
    config_note = ""
    if "alpha" in options:
        words += ["--alpha", f"{options.pop('alpha'):g}"]
    if options:  # options without a flag of their own go in a --config file
        words += ["--config", "OPTIONS.json"]
        config_note = f" (OPTIONS.json: {json.dumps({'model_options': options})})"
    for key, flag in (("epochs", "--epochs"), ("batch_size", "--batch-size"), ("seed", "--seed")):
        if c.get(key) is not None:
            words += [flag, str(c[key])]
    words += ["--out", out]
    check = ["pipeline", "compile", out, "--check-only"]
    if gate.max_latency_ms is not None:
        check += ["--max-latency-ms", f"{gate.max_latency_ms:g}", "--latency-device", gate.device]
    if gate.require_on_chip:
        check.append("--require-on-chip")
    commands: List[str] = [shlex.join(words), shlex.join(["pipeline", "export", out, "--int8"]), shlex.join(check)]
    return f"; retrain at it: {' && '.join(commands)}{config_note}"
