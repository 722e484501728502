"""The int8 model as each known classification client feeds it, for `pipeline parity`'s client rows.

    names = parse_clients("pycoral,mediapipe")              # --clients: checked against CLIENTS
    scores, refused = score_clients(runner, files, contract) # same interpreter as the int8 row

A user's accuracy depends on how their program turns a file into the model's input (resize filter,
antialiasing, how a non-square picture is fitted). Each client's feed is edge.clients' reproduction of it;
every held-out file goes in byte for byte as parity's bundle ships it, so the rows answer "what top-1 does a
user get who runs the int8 file in this client". CLIENTS is the table: a new client is one more entry.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Sequence, Tuple

import numpy as np

from edge import clients
from edge.classify import get_scores, input_details, invoke
from edge.contract import PixelContract
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
GATEABLE = tuple(name for name in CLIENTS if name != "edgeflow")  # edgeflow's row is the int8 row by another road


def gate_name(client: str) -> str:
    """The name a client row has in the gate's scores and its failure lines."""
    return f"client_{client}"


def parse_clients(text: str) -> Tuple[str, ...]:
    """--clients "pycoral,mediapipe" as checked names, in CLIENTS' order; "" or "none": no client gated."""
    names = [n.strip().lower() for n in (text or "").split(",") if n.strip()]
    if names in ([], ["none"]):
        return ()
    if names == ["all"]:
        return GATEABLE
    unknown = [n for n in names if n not in GATEABLE]
    if unknown:
        raise ConfigError(f"--clients {text!r}: unknown client {', '.join(unknown)}; expected a comma-separated list "
                          f"of {', '.join(GATEABLE)} (or all, or none)")
    return tuple(n for n in GATEABLE if n in names)


def score_clients(runner: Any, files: Sequence[bytes], contract: PixelContract,
                  names: Sequence[str] = tuple(CLIENTS)) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """[N, classes] scores per client on the held-out files through `runner`'s interpreter, and, for a client
    that cannot feed this model or one of these files, the one-line reason (its row then holds no scores)."""
    interpreter = runner.interpreter
    details = input_details(interpreter)
    scores: Dict[str, np.ndarray] = {}
    refused: Dict[str, str] = {}
    for name in names:
        feed = CLIENTS[name].feed
        rows: List[np.ndarray] = []
        try:
            for i, data in enumerate(files):
                try:
                    tensor = feed(data, details, contract)
                except InputError as err:
                    raise InputError(f"held-out image {i}: {err}") from err
                interpreter.set_tensor(details["index"], tensor)
                invoke(interpreter, f"held-out image {i} as {name} feeds it")
                rows.append(get_scores(interpreter))
        except InputError as err:
            refused[name] = str(err)
            continue
        scores[name] = np.stack(rows).astype(np.float32)
    return scores, refused
