"""Tests that another environment of the same run holds what they need for: where this one does not, they are
deselected, not skipped, and the summary says where they run, so CI's list of skips stays the hardware it lacks.

- tests/docs/test_docs.py's tests of the built site (its `reference` fixture) need the `docs` extra, which the host venv
  does not have: `.ci/docs` runs them in the venv that has it.
- Tests marked `tflite_runtime` (pycoral's make_interpreter is tflite_runtime's Interpreter) need tflite-runtime, which
  only the device extra has, and only on Python 3.9 to 3.11 (no wheel for 3.12 and later): the device suite runs them
  (.ci/edge-env, Python 3.9 in CI).
"""
from __future__ import annotations

import importlib.util
from typing import Dict, List

DOCS_MODULES = ("mkdocs", "material", "mkdocs_click")
_said: Dict[str, List[str]] = {}


def _missing(modules) -> List[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _rules():
    """(why, which tests) for each kind this environment lacks the packages for."""
    rules = []
    if _missing(DOCS_MODULES):
        rules.append((f"docs tests: {', '.join(_missing(DOCS_MODULES))} not installed here (the `docs` extra); .ci/docs runs them",
                      lambda item: item.path.name == "test_docs.py" and "reference" in getattr(item, "fixturenames", ())))
    if _missing(("tflite_runtime",)):
        rules.append(("pycoral-route tests: tflite_runtime is not installed here (the `edge` extra on Python 3.9 to 3.11); "
                      "the device suite runs them (.ci/edge-env)", lambda item: "tflite_runtime" in item.keywords))
    return rules


def header() -> List[str]:
    """The session header's lines: printed by the process that reports, with xdist too (its workers deselect)."""
    return [f"deselected where missing: {why}" for why, _ in _rules()]


def deselect(config, items) -> None:
    """Take out of ITEMS the tests this environment lacks the packages for (see above)."""
    for why, applies in _rules():
        taken = [item for item in items if applies(item)]
        if taken:
            config.hook.pytest_deselected(items=taken)
            items[:] = [item for item in items if item not in taken]
            _said[why] = [item.nodeid for item in taken]


def summary(terminalreporter) -> None:
    for why, nodeids in _said.items():
        terminalreporter.write_line(f"deselected {len(nodeids)} {why}")
    if not _said and terminalreporter.config.getoption("numprocesses", None):
        for line in header():  # xdist: the workers deselected, this process only reports (-q hides the header)
            terminalreporter.write_line(line)
