"""A detection set's classes against the run's: the same names in the same order, or a refusal naming the difference."""
from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from pipeline.errors import DataError  # noqa: E402
from pipeline.tasks.detect.data.specs import check_classes  # noqa: E402

pytestmark = pytest.mark.host

RUN = ["square", "circle", "triangle", "cross"]


def test_the_same_classes_in_the_same_order_pass():
    check_classes("H", list(RUN), RUN, "the run's")


@pytest.mark.parametrize("got, named", [
    (["square", "circle", "triangle"], "(missing 'cross')"),
    (["square", "circle", "triangle", "cross", "star"], "(not the run's: 'star')"),
    (["square", "circle", "triangle", "star"], "(missing 'cross'; not the run's: 'star')"),
    (["square", "triangle", "circle", "cross"],
     "(the same names in another order: class 1 is 'triangle', the run's class 1 is 'circle')"),
    (["square", "circle", "triangle", "cross", "cross"], "(5 classes with repeated names, 4 expected)"),
])
def test_other_classes_are_refused_naming_the_difference(got, named):
    with pytest.raises(DataError) as refused:
        check_classes("H/data.yaml", got, RUN, "the run's")
    assert str(refused.value) == f"H/data.yaml: classes {got}; expected the run's classes {RUN} in that order {named}"


def test_each_task_names_readers_that_exist_and_refuses_in_its_own_words(tmp_path):
    """open_kind serves detect and pose (pipeline/tasks/pose/data/specs.py): each reader a task names by its dotted path
    imports, and a folder or a spec of no kind is refused naming that task's kinds."""
    from pipeline.tasks.detect.data import specs as detect_specs
    from pipeline.tasks.detect.data.specs import _reader, open_kind
    from pipeline.tasks.pose.data import specs as pose_specs

    for kinds in (detect_specs.KINDS, pose_specs.KINDS):
        assert all(callable(_reader(dotted)) for dotted in (kinds.coco, kinds.yolo, kinds.tfrecords))
    for kinds, folder, unknown in (
            (detect_specs.KINDS, "expected its annotations.json (COCO), data.yaml (YOLO) or a glob",
             "is neither 'shapes', a COCO annotations.json, a YOLO data.yaml, nor a glob of TFRecord files"),
            (pose_specs.KINDS, "expected its annotations.json (COCO keypoints), data.yaml (YOLO-pose) or a glob",
             "is neither 'figures', a COCO keypoints annotations.json, a YOLO-pose data.yaml nor a glob")):
        with pytest.raises(DataError, match=r"data '.*' is a folder; " + folder.replace("(", r"\(").replace(")", r"\)")):
            open_kind(str(tmp_path), kinds, None, ())
        with pytest.raises(DataError) as refused:
            open_kind(str(tmp_path / "nothing.txt"), kinds, None, ())
        assert f"data spec '{tmp_path / 'nothing.txt'}' {unknown}" in str(refused.value)
