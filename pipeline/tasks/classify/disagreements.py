"""The held-out images the int8 model or the device answers differently from the float model.

`pipeline parity` keeps them for the report: each image's identity, label and every model's answer
(class and top score) in parity/report.json under "disagreements", and a thumbnail of the pixels
the models saw (after the pixel contract) in parity/disagreements/. Losses first: images the float
model gets right and a gated model does not.
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

FOLDER = "disagreements"  # inside RUN/parity
MAX_KEPT = 48  # thumbnails kept; "total" counts them all
THUMBNAIL_PX = 96  # larger inputs are shrunk to this (the page shows them small anyway)


def collect(scores: Dict[str, np.ndarray], reference: str, gated: Sequence[str], labels: np.ndarray,
            ids: Sequence[str]) -> dict:
    """Which images a gated model answers differently from `reference`, with every model's answer."""
    answers = {name: s.argmax(axis=1) for name, s in scores.items()}
    compared = [name for name in gated if name in answers]
    differs = np.zeros(len(labels), bool)
    for name in compared:
        differs |= answers[name] != answers[reference]
    where = np.flatnonzero(differs)
    losses_first = sorted(where, key=lambda i: (answers[reference][i] != labels[i], i))
    kept = [{"index": int(i), "id": str(ids[i]), "label": int(labels[i]),
             "answers": {name: int(a[i]) for name, a in answers.items()},
             "top_scores": {name: float(scores[name][i].max()) for name in answers},
             "thumbnail": f"{FOLDER}/{int(i):05d}.png"}
            for i in losses_first[:MAX_KEPT]]
    return {"reference": reference, "models": compared, "total": int(len(where)), "kept": kept}


def thumbnails(images: np.ndarray, record: dict) -> Dict[str, bytes]:
    """One PNG per kept image, as the models saw it (uint8 pixels at the model's size, shrunk if large):
    {path inside RUN/parity/: bytes}."""
    import io

    from PIL import Image

    out = {}
    for entry in record["kept"]:
        image = Image.fromarray(np.asarray(images[entry["index"]], np.uint8))
        if max(image.size) > THUMBNAIL_PX:
            image.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX), Image.BILINEAR)
        data = io.BytesIO()
        image.save(data, format="PNG")
        out[entry["thumbnail"]] = data.getvalue()
    return out
