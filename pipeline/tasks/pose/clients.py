"""The programs people read pose files with, and why none of them reads edgeflow's int8 pose file (model_int8.tflite:
a uint8 input, three outputs: box distributions, class logits, keypoints, decoded on the host). `pipeline parity`
reports each as a client row that names its reason (refused), as detection reports a client that cannot read a file;
`--clients` on a pose run gates them, and a gated client that cannot read the file fails the gate with that reason.

    refused = reasons(len(run.labels))          # {client: why it cannot read model_int8.tflite}

Each reason was checked against the client's newest source: Ultralytics' LiteRT backend and pose predictor (the file it
does read is tested with Ultralytics itself: tests/pipeline/tasks/pose/heads/yolo/test_ultralytics.py and
test_stages.py), pycoral's examples/movenet_pose_estimation.py, MediaPipe Tasks' PoseLandmarker and Frigate's Edge TPU
detector (frigate/detectors/plugins/edgetpu_tfl.py, model_type yolo-generic).
"""
from __future__ import annotations

from typing import Dict, NamedTuple


class Client(NamedTuple):
    says: str  # how it reads a pose file, for people


CLIENTS: Dict[str, Client] = {
    "ultralytics": Client("Ultralytics YOLO(file, task=\"pose\"): int8 input fed 0..1 on its grid, one output "
                          "[1, 4 + C + 3K, N] decoded in the graph, keypoints after the class scores"),
    "pycoral": Client("pycoral examples/movenet_pose_estimation.py: raw uint8 pixels, output 0 read as [17, 3] "
                      "(y, x, score) of one person"),
    "mediapipe": Client("MediaPipe Tasks PoseLandmarker: a .task bundle of its own person detector and 33-landmark model"),
    "frigate": Client("Frigate's Edge TPU detector, model_type yolo-generic: box distributions and class logits told "
                      "apart by shape; rows of class, score and box"),
}


def reasons(num_classes: int) -> Dict[str, str]:
    """Why each client cannot read model_int8.tflite of a run of `num_classes` classes (every client: none can)."""
    ultralytics = ("`pipeline export RUN --int8 --layout ultralytics` writes model_int8_ultralytics.tflite, the file "
                   "it reads" if num_classes == 1 else
                   f"Ultralytics reads keypoints from the channel after the first class score, so no file of this "
                   f"run's {num_classes} classes is one it reads right")
    return {
        "ultralytics": "Ultralytics' YOLO(file, task=\"pose\") reads one output [1, 4 + C + 3K, N] with the boxes and "
                       "keypoints decoded in the graph, and feeds an int8 input only (it would set 0..1 floats into this "
                       "uint8 one); model_int8.tflite has three outputs decoded on the host, and it would take the first, "
                       f"the box distributions, for its predictions. {ultralytics}",
        "pycoral": "pycoral's movenet_pose_estimation.py reshapes output 0 to [17, 3] (y, x, score of one person, "
                   "heatmaps decoded in the model); model_int8.tflite's output 0 is the box distributions [1, N, 64] of "
                   "N anchor points (any number of objects, each with its own keypoints, decoded on the host), which "
                   "cannot be reshaped so",
        "mediapipe": "MediaPipe's PoseLandmarker loads a .task bundle of its own two models (a person detector, then a "
                     "33-landmark model on each crop); a single TFLite file with its own keypoints is not one",
        "frigate": "Frigate's yolo-generic reader takes the output whose last dimension is 64 for the boxes and another "
                   "3-D output with more than one column for the class logits"
                   + (": with one class the class logits have one column, so it takes the keypoints' 3K channels for "
                      "classes" if num_classes == 1 else ", never the keypoints")
                   + "; and its detections are rows of class, score and box, with no place for keypoints",
    }
