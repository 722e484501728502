"""A detector's float post-processing tail, which an int8 Edge TPU model may end in: `TFLite_Detection_PostProcess`
(anchor decoding and non-maximum suppression) as the last op writing every model output, with the DEQUANTIZE ops
that feed it. It is what every Edge TPU detector ends in (Google's SSD and EfficientDet-Lite models); the Edge TPU
has no such operation and runs it on the CPU after everything else, so it splits nothing. The export's verification
allows it (pipeline/quant/verify.py) and the pre-flight predicts it on the CPU by design (preflight.py).
"""
from __future__ import annotations

from typing import Dict, Set

POSTPROCESS_OP = "TFLite_Detection_PostProcess"


def postprocess_tail(info) -> Set[int]:
    """Indices of the ops that form a detector's float tail: the post-processing op when it is the last op and
    writes every model output, and the DEQUANTIZE ops whose only reader it is. Empty for any other model."""
    if not info.ops:
        return set()
    last = info.ops[-1]
    if last.name != POSTPROCESS_OP or not last.is_custom or sorted(last.outputs) != sorted(info.outputs):
        return set()
    readers: Dict[int, Set[int]] = {}
    for op in info.ops:
        for t in op.inputs:
            readers.setdefault(t, set()).add(op.index)
    tail = {last.index}
    for op in info.ops[:-1]:
        if (op.name == "DEQUANTIZE" and op.outputs and all(readers.get(t) == {last.index} for t in op.outputs)
                and op.outputs[0] not in info.outputs):
            tail.add(op.index)
    return tail
