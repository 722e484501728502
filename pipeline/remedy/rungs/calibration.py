"""The calibration rung: calibrate on every training image outside the tuning split, drawn with another seed, and on
each judged client's feed of them. The float-edit and per-channel rungs build on the same calibration set
(`calibrate_on_rest`)."""
from __future__ import annotations

import dataclasses

from pipeline.remedy.rungs import Rung, Skip
from pipeline.remedy.tuning_split import TuningSplit


def calibrate_on_rest(config, tuning: TuningSplit):
    """Every training image outside the tuning split, drawn with another seed: a larger (when fewer were asked)
    and differently drawn calibration set."""
    rest = tuning.train_count - len(tuning.positions)
    return dataclasses.replace(config, calibration_samples=max(rest, config.calibration_samples or 0),
                               calibration_exclude=tuple(int(p) for p in tuning.positions), seed=config.seed + 1,
                               calibration_data=None)


def calibration(config, tuning: TuningSplit):
    from pipeline.quant.calibration import DEFAULT_CALIBRATION_SAMPLES

    asked = config.calibration_samples or DEFAULT_CALIBRATION_SAMPLES
    if config.calibration_data is None and not len(tuning.positions) and asked >= tuning.train_count and not config.clients:
        # Drawn with another seed from the same images, the calibration set would be the same set.
        return Skip(f"the export as asked already calibrates on all {tuning.train_count} training images")
    # The judged clients' feeds of the same images join them: an unsmoothed resize can hand the model pixels the
    # contract's never reach, past ranges set on the contract's alone (tests/commands/advice/test_remedy.py).
    return dataclasses.replace(calibrate_on_rest(config, tuning), calibration_clients=tuple(config.clients))


RUNG = Rung("calibration", "calibrate on every training image outside the tuning split, drawn with another seed (and on "
            "each judged client's feed of them)", calibration)
