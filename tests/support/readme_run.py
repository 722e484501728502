"""The README's first command, `pipeline run --out RUN` (digits, every default: train, export, compile, parity,
summary), run once per pytest session for every xdist worker (tests/support/session_cache.py) and shared read-only: a
test that changes the run works on `copy_of` it (tests/support/helpers.py).

    built = readme_run_once(session_folder)
    built.run, built.printed    # the run, and what the command printed

What reads it: test_parity (the stages it printed, the gate and the accuracy the README states) and
test_standalone_model (the int8 and float files alone in each client)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.support.helpers import cli
from tests.support.session_cache import built_once


def _run(folder: Path) -> None:
    result = cli(["run", "--out", str(folder / "run")], timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (folder / "run.stdout").write_text(result.stdout)


def readme_run_once(root: Path) -> SimpleNamespace:
    """The run of `pipeline run --out RUN` and what it printed, built by the first caller in this pytest session
    (ROOT is the session's shared folder). Read only: copy it before changing it."""
    folder = built_once(root / "readme", _run)
    return SimpleNamespace(run=folder / "run", printed=(folder / "run.stdout").read_text())
