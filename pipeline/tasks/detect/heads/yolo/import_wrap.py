"""An imported YOLO detector behind edgeflow's pixel contract and in its YOLO head's layout: a SavedModel whose input is
raw RGB pixels 0..255 [1, S, S, 3] and whose outputs are box distributions (1, N, 64) and class logits (1, N, C),
N the anchor points of strides 8, 16, 32 level by level and row-major, as pipeline/tasks/detect/heads/yolo/model.py's detector gives them.

The converted graph (onnx2tf, NHWC) ends at the cut (yolo_tail.py): per stride a (1, S/s, S/s, 64) and a
(1, S/s, S/s, C) map, told apart by shape. Each is reshaped to (1, cells, channels) and the levels concatenated:
reshapes and concatenations the Edge TPU maps, and no transpose. The class logits are clamped to [-4, 4] in the
graph, as the head bounds its own, so an int8 output spends its levels on scores a client can tell apart.

    write(converted_saved_model, contract, folder, num_classes)
    detector = load(folder)        # detector(image, training=False) -> {"box_dist", "class_logits"}, as export calls it
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

from pipeline.tasks.detect.heads.yolo.model import LOGIT_LIMIT  # the head's bound on its class logits
from pipeline.errors import ConfigError
from pipeline.tasks.detect.heads.yolo.onnx_tail import BOX_CHANNELS, STRIDES

# (the converted graph's signature, the input size) -> a function of its outputs to a task's own further outputs
Extra = Callable[[object, int], Callable[[Dict[str, object]], Dict[str, object]]]


def write(source: Path, contract, folder: Path, num_classes: int, extra: Optional[Extra] = None,
          name: str = "imported_yolo") -> None:
    """The wrapped SavedModel in `folder`; `extra(fn, size)`, for a task built on detection (pose's keypoints), checks
    the converted graph `fn` for its own maps and gives a function of the graph's outputs to the task's own outputs."""
    from dataclasses import replace

    import tensorflow as tf

    from pipeline.importing.wrap import prepare

    contract = replace(contract, layout="nhwc")  # the converted graph's own layout
    inner = tf.saved_model.load(str(source))
    fn = inner.signatures["serving_default"]
    (in_name, _), = fn.structured_input_signature[1].items()
    size = contract.image_size
    names = _levels(fn, size, num_classes)
    more = extra(fn, size) if extra else (lambda out: {})

    class ImportedDetector(tf.Module):
        def __init__(self):
            super().__init__(name=name)
            self.inner = inner  # tracked: its variables are saved with the wrapper

        @tf.function(input_signature=[tf.TensorSpec([1, size, size, 3], tf.float32, name="image")])
        def serve(self, image):
            out = fn(**{in_name: prepare(image, contract)})
            boxes = [tf.reshape(out[names[s][0]], [1, -1, BOX_CHANNELS]) for s in STRIDES]
            logits = [tf.reshape(out[names[s][1]], [1, -1, num_classes]) for s in STRIDES]
            bounded = tf.clip_by_value(tf.concat(logits, axis=1), -LOGIT_LIMIT, LOGIT_LIMIT)
            return {"box_dist": tf.concat(boxes, axis=1), "class_logits": bounded, **more(out)}

    module = ImportedDetector()
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.serve})


def _levels(fn, size: int, num_classes: int) -> dict:
    """stride -> (the box map's output name, the logits map's), by their NHWC shapes."""
    return maps_by_shape(fn, size, (BOX_CHANNELS, num_classes), lambda shapes, grid, stride: (
        f"the converted detector's outputs are {shapes}; expected one [1, {grid}, {grid}, {BOX_CHANNELS}] and one "
        f"[1, {grid}, {grid}, {num_classes}] at stride {stride}"))


def maps_by_shape(fn, size: int, channels: Sequence[int], refusal: Callable[[list, int, int], str]) -> dict:
    """stride -> the output names of the converted graph `fn`'s (1, S/s, S/s, c) maps, one per c in `channels`, by
    their NHWC shapes; ConfigError `refusal(its output shapes, S/s, s)` unless each shape is one output's."""
    shapes = {name: spec.shape.as_list() for name, spec in fn.structured_outputs.items()}
    found = {}
    for stride in STRIDES:
        grid = size // stride
        matches = [[n for n, s in shapes.items() if s == [1, grid, grid, c]] for c in channels]
        if any(len(match) != 1 for match in matches):
            raise ConfigError(refusal(sorted(shapes.values()), grid, stride))
        found[stride] = tuple(match[0] for match in matches)
    return found


def load(folder: Path, name: str = "imported_yolo"):
    """The run's wrapped detector as the YOLO export calls one: detector(image, training=False) -> its outputs, and its
    output_shape by name; a tf.Module, which the TFLite converter takes as the functions' owner."""
    import tensorflow as tf

    class Detector(tf.Module):
        def __init__(self):
            super().__init__(name=name)
            self.loaded = tf.saved_model.load(str(folder))
            fn = self.loaded.signatures["serving_default"]
            self.output_shape = {k: tuple(v.shape.as_list()) for k, v in fn.structured_outputs.items()}

        def __call__(self, image, training=False):
            return self.loaded.signatures["serving_default"](image=image)

    return Detector()
