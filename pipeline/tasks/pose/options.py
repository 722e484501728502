"""Pose's own command-line options: --head (train, run), --max-boxes (train) and --layout (export). Detection declares the same flags
first, so --help shows them once, with detection's words; a pose run reads them as its own, checked here."""
from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.tasks.detect.options import GATE_HELP as DETECT_GATE_HELP
from pipeline.tasks.options import Option
from pipeline.tasks.pose import heads

# `pipeline train`'s defaults of a pose model: detection's batch and warm-up (pipeline/tasks/detect/options.py, measured
# on `shapes`), 20 epochs decaying by 0.8 (detection's 0.7 is for 12). On `figures` they reach held-out OKS mAP@.5 0.970
# (docs/tasks/pose.md); two epochs reach 0.80. On real-photo objects (bench/results/pose.md) they reach 0.965-0.972 at
# 192-320 px; there, on a choosing set, decay 0.9 gained 2.2 points of OKS mAP@[.5:.95] in one run: not yet a default.
TRAIN_DEFAULTS = {"batch_size": 16, "epochs": 20,
                  "schedule": {"start": 1e-3, "max": 4e-3, "warmup_epochs": 1, "sustain_epochs": 2, "decay": 0.8}}
LAYOUTS = ("edgeflow", "ultralytics")  # export's --layout: edgeflow's file alone, or Ultralytics' beside it
MAX_BOXES = 16  # the built-in figures hold at most 3; COCO's person images rarely more than 13 labelled people

# What `pipeline train --help` says of the task: what its data specs are, what its model learns.
DATA_HELP = "figures | COCO keypoints JSON | YOLO-pose data.yaml | 'path/*.tfrecord' (pipeline prepare --task pose)"
LEARNS = "boxes and keypoints"
# What `pipeline parity --help` (and run's) says of the task's gate: the metric --max-drop limits, --min-accuracy's
# default floor, what --min-agreement counts, and which --clients read its model; and what `pipeline import` takes.
GATE_HELP = {"metric": "OKS mAP@.5",
             "floor": "better than one mean pose of the most frequent class per image",
             "agreement": DETECT_GATE_HELP["agreement"],  # detection's matching, keypoints aside
             "clients": "none reads a pose model; pycoral, mediapipe and frigate are each reported with why"}
IMPORTS = "an Ultralytics YOLO pose model's ONNX, its decoding tail cut"

OPTIONS = {
    "train": (
        Option("--head", "head", f"pose: the pose model's head ({', '.join(heads.NAMES)}; default {heads.DEFAULT})",
               heads.NAMES, default=heads.DEFAULT),
        Option("--max-boxes", "max_boxes", "pose: most objects one image may hold (default 16); every image's boxes "
               "and keypoints are padded to it", int, default=MAX_BOXES, show_default=True),
    ),
    "run": (Option("--head", "head", "pose: the pose model's head (see `pipeline train --help`)", heads.NAMES),),
    "export": (Option("--layout", "layout", "pose, with --int8: also write model_int8_ultralytics.tflite, the layout "
                      "Ultralytics' YOLO(file, task=\"pose\") reads (one class only); default edgeflow: model_int8.tflite "
                      "alone", LAYOUTS,
                      elsewhere="--layout {value} applies to pose runs (Ultralytics' pose layout); this is a {task} run"),),
}


def check(command: str, given: dict) -> None:
    if "layout" in given and given["layout"] not in LAYOUTS:
        raise ConfigError(f"--layout {given['layout']!r}; expected one of {', '.join(LAYOUTS)}")
    if "head" in given and given["head"] not in heads.NAMES:
        raise ConfigError(f"--task pose: head {given['head']!r}; expected one of {', '.join(heads.NAMES)}")
    value = given.get("max_boxes")
    if value is not None and not (isinstance(value, int) and not isinstance(value, bool)):
        raise ConfigError(f"max_boxes {value!r}, expected a whole number")
    if value is not None and value < 1:
        raise ConfigError(f"max_boxes {value}, expected at least 1")
