"""The detection gate's floor: every model's mAP@.5 above a detector with no skill (one box of the most frequent
class per image, at that class's mean box), or above --min-accuracy read as an mAP@.5 floor."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("pycocotools")

from pipeline import gate  # noqa: E402
from pipeline.tasks.detect.evaluate import Detections, evaluate  # noqa: E402
from pipeline.tasks.detect.data.examples import DetExample  # noqa: E402
from pipeline.tasks.detect import scores as detect_scores  # noqa: E402

LABELS = ["circle", "square"]


def example(n: int, boxes, classes) -> DetExample:
    return DetExample(f"img{n}.png", b"", f"d{n}", 100, 100, np.array(boxes, np.float32).reshape(-1, 4),
                      np.array(classes, np.int32))


def heldout():
    """Squares everywhere (the most frequent class), a few circles, boxes in different places."""
    rng = np.random.default_rng(0)
    out = []
    for n in range(20):
        y, x = rng.uniform(0.0, 0.6, 2)
        boxes, classes = [[y, x, y + 0.3, x + 0.3]], [1]
        if n % 4 == 0:
            boxes.append([0.7, 0.7, 0.95, 0.95])
            classes.append(0)
        out.append(example(n, boxes, classes))
    return out


def truth(examples):
    return [Detections(e.boxes, e.classes, np.ones(len(e.classes), np.float32)) for e in examples]


def test_no_skill_is_the_most_frequent_class_at_its_mean_box_scored_by_cocoeval():
    examples = heldout()
    chance = detect_scores.no_skill(examples, LABELS)
    assert chance.name == "square" and chance.images == 20
    squares = np.concatenate([e.boxes[e.classes == 1] for e in examples])
    np.testing.assert_allclose(chance.box, squares.mean(axis=0), atol=1e-6)
    guess = Detections(np.array([chance.box], np.float32), np.array([1]), np.array([1.0], np.float32))
    assert chance.map50 == pytest.approx(evaluate(examples, [guess] * 20, LABELS).map50)
    # Some squares overlap the mean box by IoU >= .5, not all, and no circle is found: above 0, under a half.
    assert 0 < chance.map50 < 0.5


def test_when_every_object_sits_at_the_same_place_no_skill_finds_the_majority_class_perfectly():
    examples = [example(n, [[0.2, 0.2, 0.6, 0.6]], [1]) for n in range(6)]
    assert detect_scores.no_skill(examples, LABELS).map50 == pytest.approx(1.0)


def scores(map50: float):
    value = gate.Score(Fraction(str(round(map50, 6))), map50)
    return {"map50": value, "map": value, gate.AGREEMENT: gate.Score(Fraction(1), 1.0)}


def check(examples, reference: float, int8: float, min_accuracy=None):
    limits = gate.GateLimits(100.0, 0.0, "map50", min_accuracy).validate(detect_scores.metrics())
    floor = gate.Floor(detect_scores.no_skill(examples, LABELS), min_accuracy, detect_scores.metrics()["map50"])
    found = gate.check({"float_savedmodel": scores(reference), "int8_cpu": scores(int8)}, limits,
                       detect_scores.metrics(), floor, gated=("int8_cpu",))
    return floor, found


def test_a_model_finding_the_objects_passes_and_one_at_the_no_skill_score_fails():
    examples = heldout()
    perfect = evaluate(examples, truth(examples), LABELS).map50
    chance = detect_scores.no_skill(examples, LABELS).map50
    floor, failures = check(examples, perfect, chance)
    assert perfect == pytest.approx(1.0)
    assert len(failures) == 1 and failures[0].startswith("int8_cpu: mAP@.5")
    assert "no better than a detector with no skill" in failures[0] and "'square'" in failures[0]
    assert floor.describe().startswith(f"mAP@.5 > {chance:.4f}")
    recorded = gate.record(gate.GateLimits(1.0, 0.0, "map50"), floor, ["float_savedmodel", "int8_cpu"], failures, ("int8_cpu",))
    assert recorded["floor"]["no_skill"]["class"] == "square" and recorded["floor"]["min_accuracy"] is None


def test_min_accuracy_is_an_explicit_map50_floor_for_the_reference_too():
    examples = heldout()
    _, failures = check(examples, 0.70, 0.72, min_accuracy=0.71)
    assert failures == ["float_savedmodel: mAP@.5 0.7000 is under --min-accuracy 0.71 (an mAP@.5 floor for a detection run)"]
    _, failures = check(examples, 0.71, 0.71, min_accuracy=0.71)
    assert failures == []


def test_min_accuracy_out_of_range_is_refused():
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="--min-accuracy 1.5, expected a share between 0 and 1"):
        gate.GateLimits(1.0, 0.0, "map50", 1.5).validate(detect_scores.metrics())
