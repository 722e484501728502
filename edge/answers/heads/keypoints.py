"""Host decoding of a YOLO pose model's three outputs, numpy only: the anchor-free detector's two (box distributions
(1, N, 64), class logits (1, N, C): edge/answers/heads/yolo.py decodes them) and keypoints (1, N, 3K).

    layout = find_layout(interpreter)       # None unless the outputs are those three
    boxes, classes, scores, keypoints = decode(*layout.read(interpreter), layout)

Per anchor point and keypoint k, channels 3k..3k+2 of the keypoints hold (dx, dy, v): the keypoint is at the anchor
point plus (dx, dy) strides, and sigmoid(v) is its score. The boxes are decoded and suppressed as the plain detector's
(one class per point, the score filter, class-agnostic NMS, the best 25), and each kept box's keypoints are read at
the anchor point it came from. Keypoints come as (x, y, score), x and y normalized to the input.

The outputs are told apart by shape, never by name: the box distributions are the 64-channel one; of the other two,
the keypoints are the one whose channels are a multiple of 3, or, when both are, the earlier one (TensorFlow's converter
writes box distributions, keypoints, class logits in that order; the export checks this rule against the file's
signature and refuses a file it would read wrong).
A plain detector has two outputs and is never read here; a pose model has three and is never read by yolo.py.
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

import numpy as np

from edge.answers.heads import yolo
from edge.answers.heads.raw import Raw


class Layout(NamedTuple):
    """Where a pose model's outputs are: the detector's two (a yolo.Layout) and the keypoints."""

    detector: yolo.Layout
    keypoints: int  # tensor index of the (1, N, 3K) keypoints
    keypoints_q: Tuple[float, int]  # (scale, zero point); scale 0 for a float output
    num_keypoints: int

    def read(self, interpreter: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Right after an invoke, the three tensors as stored (get_tensor copies), which `decode` reads later."""
        d = self.detector
        return (interpreter.get_tensor(d.boxes)[0], interpreter.get_tensor(d.logits)[0],
                interpreter.get_tensor(self.keypoints)[0])

    def raw(self, outputs: Tuple[np.ndarray, np.ndarray, np.ndarray]) -> Raw:
        """What `read` read, decoded on the host into a detector's kind of answer, with each object's keypoints."""
        boxes, classes, scores, keypoints = decode(*outputs, self)
        return Raw(boxes, classes.astype(np.float32), scores, len(scores), keypoints)


def roles(layout: Layout) -> Dict[str, int]:
    """The tensor index of each output by its role: box_dist, class_logits, keypoints."""
    return {"box_dist": layout.detector.boxes, "class_logits": layout.detector.logits, "keypoints": layout.keypoints}


def find_layout(interpreter: Any) -> Optional[Layout]:
    """The layout of an interpreter's model, or None when its outputs are not a pose model's three (module docstring)."""
    details = interpreter.get_output_details()
    if len(details) != 3:
        return None
    shapes = [[int(x) for x in d["shape"]] for d in details]
    if any(len(s) != 3 or s[0] != 1 or s[1] != shapes[0][1] for s in shapes):
        return None
    boxes = [i for i, s in enumerate(shapes) if s[2] == yolo.BOX_CHANNELS]
    if len(boxes) != 1:
        return None
    others = [i for i in range(3) if i != boxes[0]]
    thirds = [i for i in others if shapes[i][2] % 3 == 0]
    if not thirds:
        return None
    points = thirds[0]
    logits = next(i for i in others if i != points)
    shape = [int(x) for x in interpreter.get_input_details()[0]["shape"]]
    if len(shape) != 4:
        return None
    height, width = shape[1], shape[2]
    centres, strides = yolo.anchor_points(height, width)
    if len(centres) != shapes[0][1]:
        return None
    box, cls, kpt = details[boxes[0]], details[logits], details[points]
    detector = yolo.Layout(int(box["index"]), int(cls["index"]), yolo._quantization(box), yolo._quantization(cls), height, width,
                           centres, strides)
    return Layout(detector, int(kpt["index"]), yolo._quantization(kpt), shapes[points][2] // 3)


def float_layout(height: int, width: int, num_keypoints: int) -> Layout:
    """The layout of float outputs held as arrays (a float model's, outside an interpreter): no quantization."""
    centres, strides = yolo.anchor_points(height, width)
    return Layout(yolo.Layout(0, 1, (0.0, 0), (0.0, 0), height, width, centres, strides), 2, (0.0, 0), num_keypoints)


def decode(dist: np.ndarray, logits: np.ndarray, points: np.ndarray, layout: Layout,
           settings: yolo.Settings = yolo.Settings()) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(boxes [n, 4] ymin, xmin, ymax, xmax normalized to the input, class ids [n], scores [n], keypoints [n, K, 3]
    x, y normalized to the input and the keypoint's score) of one image's outputs ([N, 64], [N, C], [N, 3K], as
    stored: quantized or float), highest score first."""
    d = layout.detector
    at, boxes, classes, scores = yolo.select(dist, logits, d, settings)
    raw = yolo.dequantized(points[at], layout.keypoints_q).reshape(len(at), layout.num_keypoints, 3)
    xy = d.centres[at][:, None, :] + raw[..., :2] * d.strides[at][:, :, None]
    size = np.array([d.width, d.height], np.float32)
    keypoints = np.concatenate([xy / size, 1.0 / (1.0 + np.exp(-raw[..., 2:]))], axis=-1)
    return boxes, classes, scores, keypoints.astype(np.float32)
