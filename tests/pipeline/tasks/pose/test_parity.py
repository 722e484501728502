"""Pose parity's own parts on known answers, without a model: the gate's metric and limits, the no-skill floor, the
summary's numbers, and a device's objects read with their keypoints (a wrong keypoint list refused by result)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("pycocotools")
pytest.importorskip("tensorflow")

from pipeline import gate  # noqa: E402
from pipeline.errors import DataError  # noqa: E402
from pipeline.tasks.pose.data.specs import open_pose  # noqa: E402
from pipeline.tasks.pose.parity import PoseComparison, no_skill  # noqa: E402
from pipeline.tasks.pose.scores import truth_as_poses  # noqa: E402

pytestmark = pytest.mark.host


@pytest.fixture(scope="module")
def figures():
    return open_pose("figures?count=12&size=48&seed=6")


def _side(layout) -> PoseComparison:
    side = PoseComparison()
    side.layout = layout
    return side


def test_limits_gate_oks_map50_and_agreement_only_when_asked():
    side = PoseComparison()
    limits = side.limits(gate.GATE)
    assert (limits.metric, limits.max_drop, limits.min_agreement) == ("oks_map50", 1.0, 0.0)
    assert side.limits(gate.GATE._replace(min_agreement=0.9, metric="oks_map")).metric == "oks_map"
    assert side.limits(gate.GATE._replace(min_agreement=0.9)).min_agreement == 0.9


def test_no_skill_floor_is_low_and_perfect_answers_pass_it(figures):
    floor = no_skill(figures.examples, figures.labels, figures.layout)
    assert 0 <= floor.oks_map50 < 0.3 and floor.name == "figure" and floor.images == 12
    side = _side(figures.layout)
    held = SimpleNamespace(truth=figures.examples, labels=figures.labels)
    perfect = [truth_as_poses(e) for e in figures.examples]
    entry = side.entry(held, perfect, perfect)
    assert entry["oks_map50"] == 1.0 and entry["agreement"] == 1.0
    scores = side.gate_scores(entry)
    assert scores["oks_map50"].exact == 1 and scores[gate.AGREEMENT].exact == 1


def test_device_objects_are_read_with_their_keypoints(figures):
    side = _side(figures.layout)
    e = figures.examples[0]
    objects = [{"id": 0, "score": 0.9, "box": e.boxes[i].tolist(),
                "keypoints": [[float(x), float(y), 0.8] for x, y, _ in e.keypoints[i]]} for i in range(len(e.boxes))]
    checked = SimpleNamespace(results=SimpleNamespace(predictions=[SimpleNamespace(id=e.id, objects=objects)]))
    run = SimpleNamespace(labels=["figure"])
    found = side.device_answers(checked, run, None)
    np.testing.assert_allclose(found[0].keypoints[..., :2], e.keypoints[..., :2], rtol=1e-6)
    objects[0]["keypoints"] = objects[0]["keypoints"][:3]
    with pytest.raises(DataError, match=r"device result 0 \(figures/00000\) has an object whose keypoints are .*expected 7"):
        side.device_answers(checked, run, None)
