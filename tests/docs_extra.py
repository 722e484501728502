"""The docs tests that read the built site (tests/test_docs.py's `reference` fixture) need the `docs` extra, which the
host venv does not have: there they are deselected, not skipped, and the summary says so. `.ci/docs` runs them in the
venv that has it (CI does), so CI's list of skips stays the hardware this machine lacks."""
from __future__ import annotations

import importlib.util
from typing import List

MODULES = ("mkdocs", "material", "mkdocs_click")
_deselected: List[str] = []


def missing() -> List[str]:
    return [m for m in MODULES if importlib.util.find_spec(m) is None]


def deselect_without_the_extra(config, items) -> None:
    """Take the tests that need the built site out of ITEMS when the `docs` extra is not installed."""
    if not missing():
        return
    needing = [item for item in items if "reference" in getattr(item, "fixturenames", ())
               and item.path.name == "test_docs.py"]
    if needing:
        config.hook.pytest_deselected(items=needing)
        items[:] = [item for item in items if item not in needing]
        _deselected.extend(item.nodeid for item in needing)


def summary(terminalreporter) -> None:
    if _deselected:
        terminalreporter.write_line(f"deselected {len(_deselected)} docs tests: {', '.join(missing())} not installed here "
                                    "(the `docs` extra); .ci/docs runs them with it")
