"""Reading a detector that ends in TFLite's post-processing op (`TFLite_Detection_PostProcess`: the SSD head's export,
Google's Edge TPU detectors), numpy only: its four outputs are the answers, no decoding on the host.

    indices = find_layout(interpreter)        # where boxes, class ids, scores and count are; refuses other outputs
    raw = indices.raw(indices.read(interpreter))

The outputs are found as pycoral finds them: by the signature's names when the model has one (output_0 count,
output_1 scores, output_2 class ids, output_3 boxes), else by position (boxes, class ids, scores, count), each
checked against the op's shapes. Boxes come normalized to the input (ymin, xmin, ymax, xmax).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from edge.answers.heads.raw import Raw
from edge.errors import ModelCheckError

SIGNATURE_NAMES = ("output_3", "output_2", "output_1", "output_0")  # boxes, class ids, scores, count


class Indices(NamedTuple):
    """Tensor indices of the op's four outputs."""

    boxes: int
    classes: int
    scores: int
    count: int

    def read(self, interpreter: Any) -> Raw:
        """Right after an invoke: the four outputs (copies: the next invoke overwrites the interpreter's buffers)."""
        count = int(np.asarray(interpreter.get_tensor(self.count)).reshape(-1)[0])
        boxes = np.array(interpreter.get_tensor(self.boxes)[0], np.float32)
        count = max(0, min(count, len(boxes)))
        return Raw(boxes[:count], np.array(interpreter.get_tensor(self.classes)[0][:count]),
                   np.array(interpreter.get_tensor(self.scores)[0][:count], np.float32), count)

    def raw(self, outputs: Raw) -> Raw:
        """What `read` read is already the answer."""
        return outputs


def find_layout(interpreter: Any) -> Indices:
    """The op's four outputs: by the signature's names, else by position; checked by shape. Refuses any other outputs,
    naming what a detector's are expected to be (the last head the registry asks: edge/answers/heads/__init__.py)."""
    indices = None
    signatures = getattr(interpreter, "_get_full_signature_list", lambda: None)() or {}
    if len(signatures) == 1:
        outputs = next(iter(signatures.values())).get("outputs", {})
        if all(name in outputs for name in SIGNATURE_NAMES):
            indices = tuple(int(outputs[name]) for name in SIGNATURE_NAMES)
    details = interpreter.get_output_details()
    if indices is None:
        if len(details) != 4:
            raise ModelCheckError(f"the model has {len(details)} output(s); expected the detection post-processing op's 4 "
                                  "(boxes, class ids, scores, count)")
        indices = tuple(int(d["index"]) for d in details)
    shapes = {int(d["index"]): [int(x) for x in d["shape"]] for d in details}
    boxes, classes, scores, count = (shapes.get(i) for i in indices)
    n = boxes[1] if boxes and len(boxes) == 3 else None
    if n is None or boxes != [1, n, 4] or classes != [1, n] or scores != [1, n] or count != [1]:
        raise ModelCheckError(f"the model's outputs have shapes {boxes}, {classes}, {scores}, {count}; expected a detector's "
                              "[1, N, 4] boxes, [1, N] class ids, [1, N] scores and [1] count")
    return Indices(*indices)
