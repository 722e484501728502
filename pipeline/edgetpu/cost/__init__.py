"""A cost model of the Edge TPU: for an int8 .tflite the pre-flight has mapped, the parameter memory as the compiler lays
it out (cached on the chip, streamed from the host) and the time per inference on each Coral device.

    pipeline compile model_int8.tflite --check-only [--max-latency-ms X] [--require-on-chip]

features.py reads each op's cost from the file, layout.py lays out its parameters, predict.py turns both into
milliseconds with coefficients.json (fitted by bench/edgetpu_cost/fit.py on Coral's published times; its error on
architectures it did not see is in bench/results/edgetpu_cost.md), gate.py refuses with the change that fits.
"""
from __future__ import annotations

from typing import Optional, Union

from edge.model.tflite_file import ModelInfo, read_model

from pipeline.edgetpu.cost.predict import Estimate, estimate


def for_model(source: Union[bytes, ModelInfo], prediction) -> Optional[Estimate]:
    """The estimate for a model and its pre-flight; None when the compiler would refuse the model (nothing to cost)."""
    if prediction.fatal:
        return None
    info = source if isinstance(source, ModelInfo) else read_model(source)
    return estimate(info, prediction.rows)
