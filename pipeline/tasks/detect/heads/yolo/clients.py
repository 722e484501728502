"""How the clients read a YOLO-head detector's two outputs (box distributions, class logits): Frigate's yolo-generic
code its own way; pycoral and MediaPipe not at all (pipeline/tasks/detect/clients.py asks every head's clients.py)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import numpy as np

UNREADABLE = {
    "pycoral": "pycoral's detect_image.py (adapters/detect.py get_objects) reads the post-processing op's four outputs "
               "(boxes, class ids, scores, count); this anchor-free model has two (box distributions, class logits), "
               "which it cannot read",
    "mediapipe": "MediaPipe's ObjectDetector reads the post-processing op's four outputs (or SSD box encodings with "
                 "anchors); this anchor-free model's box distributions and class logits it cannot read",
}


def reading(detector: Any) -> Optional[Dict[str, Callable[[Any], Any]]]:
    """None for another head's model; for an anchor-free one, per client that reads it differently from edgeflow's decode, the
    reading (interpreter -> edge.answers.detect.Raw): Frigate's yolo-generic code (edge/clients/frigate.py). pycoral and MediaPipe
    cannot read it (UNREADABLE)."""
    from edge.clients import frigate as frigate_yolo
    from edge.answers.heads import yolo as yolo_decode
    from edge.answers.detect import Raw

    if not isinstance(detector.indices, yolo_decode.Layout):
        return None
    # Every detection the reading keeps is scored, as the SSD clients' rows are: its threshold lowered to the decode's.
    frigate = frigate_yolo.FrigateYolo(detector.runner.interpreter, min_score=yolo_decode.Settings().score_threshold)

    def frigate_raw(interpreter):
        boxes, classes, scores = frigate_yolo.objects(frigate.read(interpreter))
        return Raw(boxes, classes.astype(np.float32), scores, len(scores))

    return {"frigate": frigate_raw}
