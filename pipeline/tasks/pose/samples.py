"""The held-out poses a run keeps (RUN/heldout_poses.json): every held-out image's predictions, and a few images drawn
with their true boxes and keypoints and the predicted ones, skeletons joined, for the report to show without
TensorFlow or the data at hand."""
from __future__ import annotations

import base64
import io
from typing import Dict, Sequence

from PIL import Image, ImageDraw

from pipeline.tasks.detect.samples import PREDICTED, SAMPLES, SHOWN_SCORE, TRUTH, drawn as drawn_boxes
from pipeline.tasks.detect.evaluate import Detections

SHOWN_KEYPOINT = 0.5  # a predicted keypoint is drawn when its score reaches this (a visible keypoint's probability)


def heldout_document(examples: Sequence, predictions: Sequence, labels: Sequence[str], layout) -> Dict:
    images = [{"id": e.id, "height": e.height, "width": e.width,
               "poses": [{"class": int(c), "label": labels[int(c)], "score": round(float(s), 4),
                          "box": [round(float(v), 5) for v in b],  # ymin, xmin, ymax, xmax, normalized
                          "keypoints": [[round(float(v), 5) for v in point] for point in k]}  # x, y normalized, score
                         for b, c, s, k in zip(p.boxes, p.classes, p.scores, p.keypoints)]}
              for e, p in zip(examples, predictions)]
    step = max(1, len(examples) // SAMPLES)
    chosen = list(range(0, len(examples), step))[:SAMPLES]
    samples = [{"id": examples[i].id, "png": base64.b64encode(drawn(examples[i], predictions[i], labels, layout)).decode("ascii")}
               for i in chosen]
    return {"box_format": "ymin, xmin, ymax, xmax, normalized to the image",
            "keypoint_format": "x, y normalized to the image, score", "keypoints": layout.as_dict(),
            "shown_score": SHOWN_SCORE, "shown_keypoint": SHOWN_KEYPOINT, "images": images, "samples": samples}


def drawn(example, prediction, labels: Sequence[str], layout) -> bytes:
    """PNG of detection's drawing (true boxes green, predictions scoring >= SHOWN_SCORE red) with the true keypoints
    and skeletons green and the predicted ones red."""
    boxes = drawn_boxes(example, Detections(prediction.boxes, prediction.classes, prediction.scores), labels)
    with Image.open(io.BytesIO(boxes)) as im:
        image = im.convert("RGB")
    draw = ImageDraw.Draw(image)
    w, h = image.size
    for k in example.keypoints:
        _skeleton(draw, k, layout.skeleton, TRUTH, w, h, lambda p: p[2] > 0)
    for k, s in zip(prediction.keypoints, prediction.scores):
        if s >= SHOWN_SCORE:
            _skeleton(draw, k, layout.skeleton, PREDICTED, w, h, lambda p: p[2] >= SHOWN_KEYPOINT)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _skeleton(draw, points, bones, colour, w: int, h: int, shown) -> None:
    for a, b in bones:
        if shown(points[a]) and shown(points[b]):
            draw.line([(float(points[a][0]) * w, float(points[a][1]) * h), (float(points[b][0]) * w, float(points[b][1]) * h)],
                      fill=colour, width=1)
    for x, y, *rest in points:
        if shown((x, y, *rest)):
            draw.ellipse([x * w - 2, y * h - 2, x * w + 2, y * h + 2], fill=colour)
