"""The ranges rung: activation ranges that minimise int8 error on the calibration rung's images (percentile ends),
pinned on a copy of the float model (pipeline/remedy/float_edits.py)."""
from __future__ import annotations

import dataclasses

from pipeline.remedy.rungs import Rung
from pipeline.remedy.rungs.calibration import calibrate_on_rest
from pipeline.remedy.tuning_split import TuningSplit


def ranges(config, tuning: TuningSplit):
    return dataclasses.replace(calibrate_on_rest(config, tuning), float_edits=("ranges",))


RUNG = Rung("ranges", "activation ranges that minimise int8 error on the calibration rung's images (percentile ends), "
            "pinned", ranges)
