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
