"""A detector's clients: the int8 detector's objects as each known client feeds it and reads its outputs, for `pipeline
parity`'s client rows.

    found, refused = detect_clients(detector, files)         # each client's objects on each picture
"""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import importlib
import importlib.util

import numpy as np

from edge.clients import feeds as clients
from edge.pixels.contract import PixelContract
from pipeline.inference.client_scores import each_client
from pipeline.tasks.detect import heads


class Client(NamedTuple):
    place: Callable[[Any, Dict[str, Any], PixelContract], clients.Placed]  # (file bytes, details, contract) -> input, way back
    says: str  # how it feeds, for people


CLIENTS: Dict[str, DetectClient] = {
    "edgeflow": Client(lambda data, details, contract: clients.edgeflow_detect(data, details, contract),
                             "edgeflow's pixel contract (edge detect, the int8 row): stretch, bilinear antialiased"),
    **{name: Client(lambda data, details, contract, place=clients.DETECTORS[name]: place(data, details), says)
       for name, says in (
           ("pycoral", "pycoral examples/detect_image.py: letterbox (aspect kept, top-left, zeros), LANCZOS; "
                       "boxes back by its scale, whole pixels"),
           ("mediapipe", "MediaPipe Tasks ObjectDetector: stretch, bilinear not antialiased, EXIF applied; whole pixels"),
           ("frigate", "Frigate's Edge TPU SSD detector: the whole frame's square region (its calculate_region), "
                       "black outside, stretched bilinear"))},
}


def _head_reading(detector: Any) -> Tuple[Optional[Dict[str, Callable[[Any], Any]]], Dict[str, str]]:
    """How the clients read this detector's outputs when its head says otherwise than edgeflow's decode (a head's
    heads/<head>/clients.py, asked in turn: each answers only for its own models), and the clients that cannot read
    them at all with why; (None, {}) when every client reads them as edgeflow does (the post-processing op's)."""
    for head in heads.NAMES:
        name = f"{heads.__name__}.{head}.clients"
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        reading = module.reading(detector)
        if reading is not None:
            return reading, module.UNREADABLE
    return None, {}


def detect_clients(detector: Any, files: Sequence[bytes], names: Sequence[str] = tuple(CLIENTS)
                   ) -> Tuple[Dict[str, list], Dict[str, str]]:
    """Per client, the int8 detector's objects on each held-out file as that client feeds it and maps the boxes
    back (pipeline.tasks.detect.evaluate.Detections, boxes normalized to the picture), through `detector`'s own
    interpreter and output reading; and, for a client that cannot feed this model or one of these files, the
    one-line reason.

    Every object the op keeps is scored, whatever the client's own threshold (0.4 in pycoral's detect_image.py
    and Frigate): the same scoring as the int8 row, whose mAP counts them all. A client's threshold only cuts
    what its user sees, which the rows' agreement (detections scoring at least 0.4) measures."""
    from edge.answers.detect import get_raw
    from pipeline.tasks.detect.evaluate import Detections

    interpreter = detector.runner.interpreter
    contract = detector.runner.contract
    own, cannot = _head_reading(detector)  # an anchor-free head's model: Frigate reads its two outputs its own way
    unreadable = {name: cannot[name] for name in names if name in cannot}

    def placed(name: str, data: bytes, details: Dict[str, Any]):
        place = CLIENTS[name].place(data, details, contract)
        return place.tensor, (name, place)

    def objects(fed) -> Detections:
        name, place = fed
        raw = own[name](interpreter) if own is not None and name in own else get_raw(interpreter, detector.indices)
        boxes, kept = place.to_image(raw.boxes)
        width, height = place.size
        xmin, ymin, xmax, ymax = (boxes[kept].T / np.array([[width], [height], [width], [height]], np.float64))
        return Detections(np.stack([ymin, xmin, ymax, xmax], axis=1).astype(np.float32).reshape(-1, 4),
                          np.rint(raw.classes[kept]).astype(np.int32), raw.scores[kept].astype(np.float32))

    found, refused = each_client(interpreter, [n for n in names if n not in unreadable], files, placed, objects)
    return found, {**refused, **unreadable}
