"""A classifier's clients: the int8 model's scores as each known client feeds it, for `pipeline parity`'s client rows.

    scores, refused = score_clients(runner, files, contract)  # same interpreter as the int8 row
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from edge.answers.classify import get_scores
from edge.pixels.contract import PixelContract
from pipeline.inference.client_scores import CLIENTS, each_client

__all__ = ["CLIENTS", "score_clients"]  # CLIENTS: the shared feeds of an image input (calibration reads them too)


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

    answers, refused = each_client(interpreter, names, files, feed, lambda _: get_scores(interpreter))
    if fed is not None:
        fed.update({name: np.concatenate(kept[name]) for name in answers})
    return {name: np.stack(rows).astype(np.float32) for name, rows in answers.items()}, refused
