"""The words each task gives the commands' help texts, gathered by pipeline/tasks/options.py's `said`: from every task
found in pipeline/tasks/ and from a task registered from elsewhere, so that a new task's help is its own folder's."""
from __future__ import annotations

from pipeline import tasks
from pipeline.tasks.options import said

COUNT = "tests.pipeline.tasks.count"


def test_every_task_here_words_its_gate_and_what_it_learns():
    for attribute in ("DATA_HELP", "LEARNS", "GATE_HELP"):
        assert [name for name, _ in said(attribute)] == list(tasks.NAMES), attribute
    assert all(set(words) == {"metric", "floor", "agreement", "clients"} for _, words in said("GATE_HELP"))


def test_a_registered_task_s_words_are_gathered_and_leave_with_it():
    tasks.register("count", COUNT)
    try:
        assert dict(said("GATE_HELP"))["count"]["metric"] == "counts within --count-tolerance"
        assert dict(said("LEARNS"))["count"] == "how many squares"
        assert "count" not in dict(said("IMPORTS"))  # it imports nothing, so it says nothing there
    finally:
        tasks.unregister("count")
    assert "count" not in dict(said("GATE_HELP"))
