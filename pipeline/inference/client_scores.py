"""The int8 model as each known client feeds it, for `pipeline parity`'s client rows: one table per task, in the
task's package (pipeline/tasks/<task>/clients.py: its CLIENTS, and how it scores them through `each_client`).

    names = parse_clients("pycoral,mediapipe")              # --clients, before the run's task is known
    names = for_task(names, run.task)                       # the names that task has ("all" expanded)
    answers, refused = each_client(interpreter, names, files, feed, read)   # what a task's clients.py runs

A user's accuracy depends on how their program turns a file into the model's input (resize filter,
antialiasing, how a non-square picture is fitted) and, for a detector, how it maps the boxes back to the
picture. Each client's feed is edge.clients.feeds' reproduction of it; every held-out file goes in byte for byte as
parity's bundle ships it, so the rows answer "what does a user get who runs the int8 file in this client".
CLIENTS below is how each client feeds a classifier's input (an image's pixels, which quantization calibrates on
too); a task's table is a new client's one more entry.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from edge.clients import feeds as clients
from edge.answers.classify import input_details, invoke
from edge.pixels.contract import PixelContract
from edge.errors import InputError
from pipeline import tasks
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


ALL = "all"  # --clients all before the task is known: each task's own gateable clients


def gateable(task: str) -> Tuple[str, ...]:
    """The clients --clients may name for a task (the table of its clients.py; none without one): edgeflow's row is
    the int8 row by another road."""
    module = tasks.part(task, "clients")
    return tuple(name for name in (module.CLIENTS if module is not None else ()) if name != "edgeflow")


def _any_task() -> Tuple[str, ...]:
    return tuple(dict.fromkeys(name for task in tasks.names() for name in gateable(task)))


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
    known = gateable(task) if task is not None else _any_task()
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


def each_client(interpreter: Any, names: Sequence[str], files: Sequence[bytes],
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


