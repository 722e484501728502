"""Pose estimation on the device, TensorFlow-free: open a pose model (a YOLO detector with a keypoint output) and read
each object's box and keypoints in the image's own pixels. A pose model is a detector whose objects carry keypoints,
so everything after opening is edge.answers.detect's (detect_file, detect_files, objects, as_record, annotate).

    from edge.answers.pose import open_pose, poses_file
    from edge.answers.detect import as_record
    model = open_pose("pose_int8.tflite")                     # checks, interpreter, contract, labels
    for obj in poses_file(model, "people.jpg", threshold=0.4):
        print(obj.label, obj.score, obj.box, obj.keypoints[0])     # keypoints: (x, y, score), x and y in pixels
        print(as_record(obj))                                        # JSON: keypoints as [x, y, score]

The outputs are found and decoded by edge/answers/heads/keypoints.py (by shape); a model without a pose model's three
outputs is refused naming them. The pixel contract stretches the whole image to the input, so normalized coordinates
times the image's width and height are its pixels, as for the boxes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional, Tuple, Union

from edge.answers.detect import DEFAULT_THRESHOLD, DETECTOR, Detector, Object, detect_file
from edge.answers.heads import keypoints as pose_decode
from edge.answers.runner import Kind, Runner, Say, quiet
from edge.errors import ModelCheckError
from edge.model.labels import labels_from_model


def pose_layout(interpreter: Any) -> pose_decode.Layout:
    """The pose model's outputs, or ModelCheckError naming what they are expected to be."""
    found = pose_decode.find_layout(interpreter)
    if found is None:
        shapes = [[int(x) for x in d["shape"]] for d in interpreter.get_output_details()]
        raise ModelCheckError(f"the model's outputs have shapes {shapes}; expected a pose model's three: box distributions "
                              "[1, N, 64], class logits [1, N, C] and keypoints [1, N, 3K], N the anchor points of strides "
                              "8, 16 and 32 at the input's size")
    return found


def _pose_labels(labels_file, records, embedded, data, meta, name) -> Tuple[Optional[List[str]], str]:
    """--labels, else the recorded labels (a sidecar's or manifest's, else the model's own record), else the label file
    packed on whichever output carries one (the class logits, TENSOR_AXIS_LABELS)."""
    labels, labels_from = DETECTOR.labels(labels_file, records, embedded, data, meta, name)
    if labels is None:
        packed = next((i for i, tensor in enumerate(meta.outputs) if tensor.label_files), None)
        if packed is not None:
            labels = labels_from_model(data, packed, name, meta)
            labels_from = "labels: the label file packed on the model's class logits"
    return labels, labels_from


POSE = Kind(pose_layout, _pose_labels)  # Runner.open's kind: a pose model's outputs and labels


def open_pose(model: Union[str, Path], *, edgetpu: Optional[bool] = None, threads: Optional[int] = None,
              backend: Optional[str] = None, verify_sha256: bool = True, labels_file: Optional[Union[str, Path]] = None,
              say: Say = quiet) -> Detector:
    """Open a pose model by the device's one policy (edge.answers.runner's Runner.open): sha256, interpreter, the outputs
    checked (a pose model's three, else refused), pixel contract, labels."""
    runner = Runner.open(model, edgetpu=edgetpu, threads=threads, backend=backend, verify_sha256=verify_sha256,
                         labels_file=labels_file, say=say, kind=POSE)
    return Detector(runner, runner.outputs)


def poses_file(model: Detector, source: Union[str, Path, bytes], threshold: float = DEFAULT_THRESHOLD,
               name: Optional[str] = None) -> List[Object]:
    """The objects in one image file (or encoded bytes), each with its keypoints, in that image's pixels."""
    return detect_file(model, source, threshold, name)
