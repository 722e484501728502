"""Classification's own command-line options: --top-k (parity, predict) and --gate-metric (parity, run)."""
from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.gate import GATE
from pipeline.tasks.classify.scores import GATE_METRICS
from pipeline.tasks.options import Option

# What `pipeline train --help` says of the task: what its data specs are, what its model learns.
DATA_HELP = "digits | 'path/train-*.tfrec' (Kaggle TPU schema, local or gs://) | folder of class folders"
LEARNS = "one class per image"
# What `pipeline parity --help` (and run's) says of the task's gate: the metric --max-drop limits, --min-accuracy's
# default floor, what --min-agreement counts, and which --clients read its model; and what `pipeline import` takes.
GATE_HELP = {"metric": "top-1 accuracy (or macro-F1: --gate-metric)",
             "floor": "better than always answering the most frequent held-out class",
             "agreement": f"the share of images whose top-1 class is the float model's (default {GATE.min_agreement:g})",
             "clients": "pycoral (classify_image.py), mediapipe (ImageClassifier)"}
IMPORTS = "a Keras, SavedModel or ONNX classifier"

_GATE_METRIC = "--gate-metric"
_NOT_RANKED = "{flag} applies to classification runs; a {task} run writes no ranked classes"

OPTIONS = {
    "parity": (
        Option("--top-k", "top_k", "k for top-k accuracy (default 5)", int, default=5),
        Option(_GATE_METRIC, "gate_metric", f"what --max-drop limits: top1 (top-1 accuracy) or macro_f1 (macro-F1 x 100) "
               f"(default {GATE.metric})", GATE_METRICS, default=GATE.metric),
    ),
    "predict": (Option("--top-k", "top_k", "add the K best classes' names and scores", int, elsewhere=_NOT_RANKED),),
    "run": (Option(_GATE_METRIC, "gate_metric", "parity gate: what --max-drop limits, top-1 accuracy or macro-F1 (x 100)",
                   GATE_METRICS, default=GATE.metric, show_default=True),),
}


def check(command: str, given: dict) -> None:
    """Refuse a value out of range, as each command always has."""
    top_k = given.get("top_k")
    if top_k is not None and command == "parity" and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ConfigError(f"--top-k {top_k!r}, expected a whole number >= 1")
    if top_k is not None and command == "predict" and top_k < 1:
        raise ConfigError(f"--top-k {top_k}, expected 1 or more")
    metric = given.get("gate_metric")
    if metric is not None and metric not in GATE_METRICS:
        raise ConfigError(f"{_GATE_METRIC} {metric!r}, expected one of {', '.join(GATE_METRICS)}")
