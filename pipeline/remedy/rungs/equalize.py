"""The equalize rung: cross-layer equalization of depthwise-separable pairs (pipeline/remedy/float_edits.py), where the
weights are per tensor. Like every float edit it takes its statistics (ReLU6 peaks) from the calibration images, so it
builds on the calibration rung's set: 8 images under-estimate the peaks, and equalization then moves ReLU6's cap on
new images."""
from __future__ import annotations

import dataclasses

from pipeline.remedy.rungs import Rung, Skip
from pipeline.remedy.rungs.calibration import calibrate_on_rest
from pipeline.remedy.tuning_split import TuningSplit


def equalize(config, tuning: TuningSplit):
    if not config.per_tensor:
        return Skip("per-channel weights already give each depthwise channel its own scale")
    return dataclasses.replace(calibrate_on_rest(config, tuning), float_edits=("equalize",))


RUNG = Rung("equalize", "cross-layer equalization of depthwise-separable pairs (per-tensor weights)", equalize)
