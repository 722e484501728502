"""The bias rung: bias correction of conv/dense layers for their weights' expected rounding shift
(pipeline/remedy/float_edits.py), from the mean inputs on the calibration rung's images."""
from __future__ import annotations

import dataclasses

from pipeline.remedy.rungs import Rung
from pipeline.remedy.rungs.calibration import calibrate_on_rest
from pipeline.remedy.tuning_split import TuningSplit


def bias(config, tuning: TuningSplit):
    return dataclasses.replace(calibrate_on_rest(config, tuning), float_edits=("bias",))


RUNG = Rung("bias", "bias correction of conv/dense layers for their weights' expected rounding shift", bias)
