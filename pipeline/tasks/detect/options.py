"""Detection's own command-line options: --head (train, run) and --max-boxes (train)."""
from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.tasks.detect import heads
from pipeline.tasks.options import Option

# `pipeline train`'s defaults of a detector. Measured on `shapes` (bench/results/detect.md): batch 16 gives twice the
# updates of 32 for the same images, and a short warm-up from 1e-3 wastes no epoch at a rate too low to learn.
TRAIN_DEFAULTS = {"batch_size": 16, "epochs": 12,
                  "schedule": {"start": 1e-3, "max": 4e-3, "warmup_epochs": 1, "sustain_epochs": 2, "decay": 0.7}}
_NOT_A_DETECTOR = "{flag} {value} is a detector's head; expected --task detect, or no {flag}"

# What `pipeline train --help` says of the task: what its data specs are, what its model learns.
DATA_HELP = "shapes | PATH/annotations.json (COCO) | PATH/data.yaml (YOLO) | 'path/*.tfrecord' (TF OD API schema)"
LEARNS = "boxes and classes"
# What `pipeline parity --help` (and run's) says of the task's gate: the metric --max-drop limits, --min-accuracy's
# default floor, what --min-agreement counts, and which --clients read its model; and what `pipeline import` takes.
GATE_HELP = {"metric": "mAP@.5",
             "floor": "better than one box of the most frequent class per image",
             "agreement": "the share of the float model's detections the gated model matches (only when given)",
             "clients": "pycoral (detect_image.py), mediapipe (ObjectDetector), frigate"}
IMPORTS = "an Ultralytics YOLO detector's ONNX, its decoding tail cut"

OPTIONS = {
    "train": (
        Option("--head", "head", "detect: ssd (default; anchors and TFLite's post-processing op in the model) or yolo "
               "(anchor-free, YOLOv8's head and loss, decoded on the host: Frigate's yolo-generic layout, docs/yolo.md)",
               heads.NAMES, default=heads.DEFAULT, show_default=True, elsewhere=_NOT_A_DETECTOR),
        # every image's boxes are padded to it (a static shape)
        Option("--max-boxes", "max_boxes", "detect: most objects one image may hold (default 32; COCO 2017's crowded "
               "images hold up to ~90). Every image's boxes are padded to it, a static [batch, N, 4] shape, so each "
               "step's memory and time grow with N", int, default=32, show_default=True),
    ),
    "run": (Option("--head", "head", "detect: the detector's head (see `pipeline train --help`)", heads.NAMES,
                   elsewhere=_NOT_A_DETECTOR),),
}


def check(command: str, given: dict) -> None:
    """Refuse a value out of range, as `pipeline train` always has."""
    if "head" in given and given["head"] not in heads.NAMES:
        raise ConfigError(f"head {given['head']!r}, expected one of {', '.join(heads.NAMES)}")
    if "max_boxes" in given and not (isinstance(given["max_boxes"], int) and not isinstance(given["max_boxes"], bool)):
        raise ConfigError(f"max_boxes {given['max_boxes']!r}, expected a whole number")
    if "max_boxes" in given and not given["max_boxes"] >= 1:
        raise ConfigError(f"max_boxes {given['max_boxes']}, expected at least 1")
