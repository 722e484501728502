"""The per-channel rung: one scale per output channel of each weight tensor, where per tensor was asked, on the
calibration rung's images."""
from __future__ import annotations

import dataclasses

from pipeline.remedy.rungs import Rung, Skip
from pipeline.remedy.rungs.calibration import calibrate_on_rest
from pipeline.remedy.tuning_split import TuningSplit


def per_channel(config, tuning: TuningSplit):
    if not config.per_tensor:
        return Skip("the weights are already per channel")
    return dataclasses.replace(calibrate_on_rest(config, tuning), per_tensor=False, seed=config.seed)


RUNG = Rung("per-channel", "one scale per output channel of each weight tensor, where per tensor was asked", per_channel)
