"""What detection parity records for the report: the precision-recall curve at IoU 0.5 from COCOeval's precision
array (its mean is mAP@.5), and thumbnails of the held-out images where a model and the float model disagree."""
from __future__ import annotations

import base64
import io

import numpy as np
import pytest

pytest.importorskip("pycocotools")

from PIL import Image  # noqa: E402

from pipeline.tasks.detect.evaluate import Detections, evaluate  # noqa: E402
from pipeline.tasks.detect.data.examples import DetExample  # noqa: E402
from pipeline.tasks.detect import drawn as detect_drawn, scores as detect_scores  # noqa: E402

LABELS = ["circle", "square", "triangle"]


def example(n: int, boxes, classes, size=(80, 120)) -> DetExample:
    out = io.BytesIO()
    Image.fromarray(np.full((*size, 3), 200, np.uint8)).save(out, format="PNG")
    return DetExample(f"img{n}.png", out.getvalue(), f"d{n}", size[0], size[1], np.array(boxes, np.float32).reshape(-1, 4),
                      np.array(classes, np.int32))


def dets(boxes, classes, scores):
    return Detections(np.array(boxes, np.float32).reshape(-1, 4), np.array(classes, np.int32), np.array(scores, np.float32))


@pytest.fixture
def scene():
    rng = np.random.default_rng(2)
    examples, found = [], []
    for n in range(12):
        y, x = rng.uniform(0.05, 0.5, 2)
        truth = [[y, x, y + 0.4, x + 0.4]]
        examples.append(example(n, truth, [n % 2]))
        # Right box most of the time, a wrong class or a shifted box otherwise, with scores that interleave.
        box = truth[0] if n % 3 else [y + 0.3, x + 0.3, y + 0.6, x + 0.6]
        found.append(dets([box, [0.0, 0.0, 0.1, 0.1]], [n % 2, 2], [rng.uniform(0.5, 1.0), 0.2]))
    return examples, found


def test_the_curves_mean_is_cocoevals_map50(scene):
    examples, found = scene
    curve = detect_scores.precision_recall_50(examples, found, LABELS)
    assert len(curve) == 101 and all(v is not None and 0 <= v <= 1 for v in curve)
    assert np.mean(curve) == pytest.approx(evaluate(examples, found, LABELS).map50, abs=1e-5)
    assert curve[0] > curve[-1]  # a third of the objects are never found: precision 0 at full recall


def test_finding_every_object_is_precision_one_at_every_recall(scene):
    examples, _ = scene
    perfect = [dets(e.boxes, e.classes, [1.0] * len(e.classes)) for e in examples]
    assert detect_scores.precision_recall_50(examples, perfect, LABELS) == [1.0] * 101


def test_disagreements_count_both_ways_and_draw_both_models_boxes(scene):
    examples, found = scene
    other = [dets(f.boxes, f.classes, f.scores) for f in found]
    shifted = examples[4].boxes[0] + np.array([0.3, 0.3, 0.3, 0.3], np.float32)
    other[4] = dets([shifted], [examples[4].classes[0]], [0.9])  # found elsewhere: one missed, one extra
    other[5] = dets(found[5].boxes, [2, 2], found[5].scores)  # another class: missed and extra too
    other[6] = dets(found[6].boxes, found[6].classes, [0.45, 0.3])  # another score, both sides of 0.4 alike: agrees
    shown = detect_drawn.disagreements(examples, found, {"int8_cpu": other})
    assert [d["id"] for d in shown] == ["img4.png", "img5.png"]
    entry = next(d for d in shown if d["id"] == "img4.png")
    assert (entry["model"], entry["missed"], entry["extra"]) == ("int8_cpu", 1, 1)
    image = np.asarray(Image.open(io.BytesIO(base64.b64decode(entry["png"]))).convert("RGB"))
    assert max(image.shape[:2]) == detect_drawn.THUMBNAIL_SIDE
    colours = {tuple(c) for c in image.reshape(-1, 3)}
    assert (21, 101, 192) in colours and (198, 40, 40) in colours  # the float model's boxes blue, the other's red


def test_agreeing_models_show_no_image(scene):
    examples, found = scene
    assert detect_drawn.disagreements(examples, found, {"int8_cpu": found}) == []


def test_report_draws_one_curve_per_model():
    from pipeline.tasks.detect.report import pr_curves

    curve = [1.0] * 50 + [0.5] * 51
    svg = pr_curves({"float_savedmodel": {"map50": 0.75, "precision_at_recall_50": curve},
                     "int8_cpu": {"map50": 0.74, "precision_at_recall_50": [None] * 101}})
    text = base64.b64decode(svg.split(",", 1)[1]).decode("utf-8")
    assert svg.startswith("data:image/svg+xml;base64,") and "float_savedmodel (mAP@.5 0.750)" in text
    assert pr_curves({"float_savedmodel": {"map50": 0.75}}) is None  # a report written before the curves
