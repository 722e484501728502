"""The fine-tuning rungs, the ladder's most expensive: a few epochs of quantization-aware training (per channel) that
learn the float model's own scores (`distil-N`: the gate measures agreement with float), then a few that learn the
labels (`qat-N`); pipeline/quant/qat.py trains them."""
from __future__ import annotations

import dataclasses

from pipeline.remedy.rungs import Rung, Skip
from pipeline.remedy.tuning_split import TuningSplit

QAT_EPOCHS = (2, 5)  # a few epochs: the ladder's most expensive rungs
DISTIL_EPOCHS = (2,)  # distillation's epochs: each is DISTIL_VIEWS (pipeline/quant/qat.py) passes over the images


def fine_tuning(epochs: int, distil: bool = False):
    """The rung that fine-tunes `epochs` epochs, on the float model's scores (`distil`) or on the labels."""
    def rung(config, tuning: TuningSplit):
        if config.qat_epochs >= epochs and not distil:
            return Skip(f"the export as asked already fine-tunes {config.qat_epochs} epochs")
        # The tuning split stays out of distillation's images and calibration both: the ladder judges on it.
        return dataclasses.replace(config, qat_epochs=epochs, qat_distil=distil, per_tensor=False, calibration_data=None,
                                   calibration_exclude=tuple(int(p) for p in tuning.positions))
    return rung


RUNGS = (*(Rung(f"distil-{n}", f"{n} epochs of quantization-aware fine-tuning on the float model's own scores (per "
                "channel)", fine_tuning(n, distil=True)) for n in DISTIL_EPOCHS),
         *(Rung(f"qat-{n}", f"{n} epochs of quantization-aware fine-tuning (per channel)", fine_tuning(n))
           for n in QAT_EPOCHS))
