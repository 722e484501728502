"""The held-out detections a run keeps (RUN/heldout_detections.json): every held-out image's predictions,
and a few images drawn with their true boxes and the predicted ones, for the report to show without
TensorFlow or the data at hand."""
from __future__ import annotations

import base64
import io
from typing import Dict, List, Sequence

import numpy as np
from PIL import Image, ImageDraw

from pipeline.tasks.detect.evaluate import Detections
from pipeline.tasks.detect.data.examples import DetExample

SAMPLES = 8  # images drawn for the report
THUMBNAIL = 192  # longest side of a drawn image, pixels
SHOWN_SCORE = 0.4  # predictions drawn on the thumbnails: pycoral's and Frigate's default threshold
TRUTH, PREDICTED = (40, 200, 40), (230, 40, 40)


def heldout_document(examples: Sequence[DetExample], predictions: Sequence[Detections], labels: Sequence[str]) -> Dict:
    images = [{"id": e.id, "height": e.height, "width": e.width,
               "detections": [{"class": int(c), "label": labels[int(c)], "score": round(float(s), 4),
                               "box": [round(float(v), 5) for v in b]}  # ymin, xmin, ymax, xmax, normalized
                              for b, c, s in zip(p.boxes, p.classes, p.scores)]}
              for e, p in zip(examples, predictions)]
    step = max(1, len(examples) // SAMPLES)
    chosen = list(range(0, len(examples), step))[:SAMPLES]
    samples = [{"id": examples[i].id, "png": base64.b64encode(drawn(examples[i], predictions[i], labels)).decode("ascii")}
               for i in chosen]
    return {"box_format": "ymin, xmin, ymax, xmax, normalized to the image", "shown_score": SHOWN_SCORE,
            "images": images, "samples": samples}


def drawn(example: DetExample, prediction: Detections, labels: Sequence[str]) -> bytes:
    """PNG of the image with its true boxes (green) and predictions scoring >= SHOWN_SCORE (red, labelled)."""
    with Image.open(io.BytesIO(example.image)) as im:
        image = im.convert("RGB")
    scale = THUMBNAIL / max(image.size)
    image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.BILINEAR)
    draw = ImageDraw.Draw(image)
    w, h = image.size
    for box in example.boxes:
        draw.rectangle(_pixels(box, w, h), outline=TRUTH, width=2)
    for box, c, s in zip(prediction.boxes, prediction.classes, prediction.scores):
        if s >= SHOWN_SCORE:
            x0, y0, x1, y1 = _pixels(box, w, h)
            draw.rectangle((x0, y0, x1, y1), outline=PREDICTED, width=1)
            draw.text((x0 + 2, y0 + 1), f"{labels[int(c)]} {s:.2f}", fill=PREDICTED)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _pixels(box, w: int, h: int) -> List[float]:
    ymin, xmin, ymax, xmax = (float(v) for v in np.asarray(box))
    return [xmin * w, ymin * h, max(xmin * w, xmax * w - 1), max(ymin * h, ymax * h - 1)]
