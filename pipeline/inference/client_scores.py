"""The int8 model as each known client feeds it, for `pipeline parity`'s client rows: one table per task.

    names = parse_clients("pycoral,mediapipe")              # --clients, before the run's task is known
    names = for_task(names, "detect")                       # the names that task has ("all" expanded)
    scores, refused = score_clients(runner, files, contract) # classifiers: same interpreter as the int8 row
    found, refused = detect_clients(detector, files)         # detectors: each client's objects on each picture

A user's accuracy depends on how their program turns a file into the model's input (resize filter,
antialiasing, how a non-square picture is fitted) and, for a detector, how it maps the boxes back to the
picture. Each client's feed is edge.clients.feeds' reproduction of it; every held-out file goes in byte for byte as
parity's bundle ships it, so the rows answer "what does a user get who runs the int8 file in this client".
CLIENTS (classifiers) and DETECT_CLIENTS (detectors) are the tables: a new client is one more entry.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from edge.clients import feeds as clients
from edge.answers.classify import get_scores, input_details, invoke
from edge.pixels.contract import PixelContract
from edge.errors import InputError
from pipeline.errors import ConfigError

Feed = Callable[[Any, Dict[str, Any], PixelContract], np.ndarray]


class Client(NamedTuple):
    feed: Feed  # (file bytes, the input's details, the model's contract) -> the tensor the client sets
    says: str  # how it feeds, for people


CLIENTS: Dict[str, Client] = {
    "edgeflow": Client(lambda data, details, contract: clients.edgeflow(data, details, contract),
                       "edgeflow's pixel contract (edge classify, the int8 row): stretch, bilinear antialiased"),
    **{name: Client(lambda data, details, contract, feed=feed: feed(data, details), says)
       for name, feed, says in (
           ("pycoral", clients.CLASSIFIERS["pycoral"],
            "pycoral examples/classify_image.py, default flags: stretch, LANCZOS"),
           ("mediapipe", clients.CLASSIFIERS["mediapipe"],
            "MediaPipe Tasks ImageClassifier: stretch, bilinear not antialiased, EXIF applied"))},
}


class DetectClient(NamedTuple):
    place: Callable[[Any, Dict[str, Any], PixelContract], clients.Placed]  # (file bytes, details, contract) -> input, way back
    says: str  # how it feeds, for people


DETECT_CLIENTS: Dict[str, DetectClient] = {
    "edgeflow": DetectClient(lambda data, details, contract: clients.edgeflow_detect(data, details, contract),
                             "edgeflow's pixel contract (edge detect, the int8 row): stretch, bilinear antialiased"),
    **{name: DetectClient(lambda data, details, contract, place=clients.DETECTORS[name]: place(data, details), says)
       for name, says in (
           ("pycoral", "pycoral examples/detect_image.py: letterbox (aspect kept, top-left, zeros), LANCZOS; "
                       "boxes back by its scale, whole pixels"),
           ("mediapipe", "MediaPipe Tasks ObjectDetector: stretch, bilinear not antialiased, EXIF applied; whole pixels"),
           ("frigate", "Frigate's Edge TPU SSD detector: the whole frame's square region (its calculate_region), "
                       "black outside, stretched bilinear"))},
}
TASK_CLIENTS = {"classify": CLIENTS, "detect": DETECT_CLIENTS}
ALL = "all"  # --clients all before the task is known: each task's own gateable clients


def gateable(task: str) -> Tuple[str, ...]:
    """The clients --clients may name for a task: edgeflow's row is the int8 row by another road."""
    return tuple(name for name in TASK_CLIENTS[task] if name != "edgeflow")


GATEABLE = gateable("classify")
_ANY_TASK = tuple(dict.fromkeys(name for task in TASK_CLIENTS for name in gateable(task)))


def gate_name(client: str) -> str:
    """The name a client row has in the gate's scores and its failure lines."""
    return f"client_{client}"


def parse_clients(text: str, task: Optional[str] = None) -> Tuple[str, ...]:
    """--clients "pycoral,mediapipe" as checked names, in the table's order; "" or "none": no client gated.

    With the task, the names are checked against its clients and "all" is all of them; without it (`pipeline
    parity RUN` has not opened the run yet) against every task's, and "all" stays ("all",) for for_task."""
    names = [n.strip().lower() for n in (text or "").split(",") if n.strip()]
    if names in ([], ["none"]):
        return ()
    known = gateable(task) if task is not None else _ANY_TASK
    if names == [ALL]:
        return known if task is not None else (ALL,)
    unknown = [n for n in names if n not in known]
    if unknown:
        run = f" for a {task} run" if task is not None else ""
        raise ConfigError(f"--clients {text!r}: unknown client {', '.join(unknown)}{run}; expected a comma-separated list "
                          f"of {', '.join(known)} (or all, or none)")
    return tuple(n for n in known if n in names)


def for_task(names: Sequence[str], task: str) -> Tuple[str, ...]:
    """parse_clients' names as `task` has them: "all" expanded, a name the task has no client for refused."""
    return parse_clients(",".join(names), task)


def score_clients(runner: Any, files: Sequence[bytes], contract: PixelContract, names: Sequence[str] = tuple(CLIENTS),
                  fed: Optional[Dict[str, np.ndarray]] = None) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """[N, classes] scores per client on the held-out files through `runner`'s interpreter, and, for a client
    that cannot feed this model or one of these files, the one-line reason (its row then holds no scores).
    `fed`, when given, is filled with each scored client's input pixels [N,S,S,3] (to feed the float model alike)."""
    interpreter = runner.interpreter
    kept: Dict[str, list] = {}

    def feed(name, data, details):
        tensor = CLIENTS[name].feed(data, details, contract)
        if fed is not None:
            kept.setdefault(name, []).append(tensor)
        return tensor, None

    answers, refused = _each_client(interpreter, names, files, feed, lambda _: get_scores(interpreter))
    if fed is not None:
        fed.update({name: np.concatenate(kept[name]) for name in answers})
    return {name: np.stack(rows).astype(np.float32) for name, rows in answers.items()}, refused


YOLO_UNREADABLE = {
    "pycoral": "pycoral's detect_image.py (adapters/detect.py get_objects) reads the post-processing op's four outputs "
               "(boxes, class ids, scores, count); this anchor-free model has two (box distributions, class logits), "
               "which it cannot read",
    "mediapipe": "MediaPipe's ObjectDetector reads the post-processing op's four outputs (or SSD box encodings with "
                 "anchors); this anchor-free model's box distributions and class logits it cannot read",
}


def yolo_reading(detector: Any) -> Optional[Dict[str, Callable[[Any], Any]]]:
    """None for an SSD model; for an anchor-free one, per client that reads it differently from edgeflow's decode, the
    reading (interpreter -> edge.answers.detect.Raw): Frigate's yolo-generic code (edge/clients/frigate.py). pycoral and MediaPipe
    cannot read it (YOLO_UNREADABLE)."""
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


def _each_client(interpreter: Any, names: Sequence[str], files: Sequence[bytes],
                 feed: Callable[[str, bytes, Dict[str, Any]], Tuple[np.ndarray, Any]],
                 read: Callable[[Any], Any]) -> Tuple[Dict[str, list], Dict[str, str]]:
    """Per client name, read(fed) after each file is fed as feed(name, file, input details) -> (tensor, fed) and
    invoked; a client that cannot feed the model or one of the files gets the one-line reason instead, naming the
    held-out image."""
    details = input_details(interpreter)
    answers: Dict[str, list] = {}
    refused: Dict[str, str] = {}
    for name in names:
        rows = []
        try:
            for i, data in enumerate(files):
                try:
                    tensor, fed = feed(name, data, details)
                except InputError as err:
                    raise InputError(f"held-out image {i}: {err}") from err
                interpreter.set_tensor(details["index"], tensor)
                invoke(interpreter, f"held-out image {i} as {name} feeds it")
                rows.append(read(fed))
        except InputError as err:
            refused[name] = str(err)
            continue
        answers[name] = rows
    return answers, refused


def detect_clients(detector: Any, files: Sequence[bytes], names: Sequence[str] = tuple(DETECT_CLIENTS)
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
    anchor_free = yolo_reading(detector)  # an anchor-free head's model: Frigate reads its two outputs its own way
    unreadable = {name: YOLO_UNREADABLE[name] for name in names if anchor_free is not None and name in YOLO_UNREADABLE}

    def placed(name: str, data: bytes, details: Dict[str, Any]):
        place = DETECT_CLIENTS[name].place(data, details, contract)
        return place.tensor, (name, place)

    def objects(fed) -> Detections:
        name, place = fed
        raw = anchor_free[name](interpreter) if anchor_free is not None and name in anchor_free else get_raw(interpreter, detector.indices)
        boxes, kept = place.to_image(raw.boxes)
        width, height = place.size
        xmin, ymin, xmax, ymax = (boxes[kept].T / np.array([[width], [height], [width], [height]], np.float64))
        return Detections(np.stack([ymin, xmin, ymax, xmax], axis=1).astype(np.float32).reshape(-1, 4),
                          np.rint(raw.classes[kept]).astype(np.int32), raw.scores[kept].astype(np.float32))

    found, refused = _each_client(interpreter, [n for n in names if n not in unreadable], files, placed, objects)
    return found, {**refused, **unreadable}
