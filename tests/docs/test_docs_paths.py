"""Every repository path the documentation cites exists.

`mkdocs build --strict` checks the links between pages; this checks the rest: the source files, tests, benchmark
scripts and results files that README.md, bench/README.md and docs/ name in their text.
"""
from __future__ import annotations

import re

import pytest

from tests.support.helpers import REPO

PAGES = sorted(REPO.glob("docs/**/*.md")) + [REPO / "README.md", REPO / "bench" / "README.md"]
# A path that starts at one of the repository's top folders, not in the middle of another path (a link target
# such as ../../bench/results/x.md is checked by mkdocs, and its text names the same path).
CITED = re.compile(r"(?<![\w./-])((?:pipeline|edge|models|tests|bench|docs|\.ci)/[\w./*-]*[\w/*])")


def _cited(text: str) -> set:
    return set(CITED.findall(text))


def test_the_pattern_finds_paths_in_text_and_code_spans_not_inside_other_paths():
    text = "see `edge/answers/runner.py`, (bench/results/clients.md) and [x](../../bench/results/x.md); RUN/parity/report.json"
    assert _cited(text) == {"edge/answers/runner.py", "bench/results/clients.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_path_a_page_cites_exists(page):
    missing = sorted(path for path in _cited(page.read_text())
                     if not (list(REPO.glob(path)) if "*" in path else (REPO / path).exists()))
    assert not missing, f"{page.relative_to(REPO)} cites paths that are not in the repository: {missing}"


def test_bench_readme_lists_every_script_in_bench():
    index = (REPO / "bench" / "README.md").read_text()
    scripts = [s.relative_to(REPO).as_posix() for s in (REPO / "bench").rglob("*.py") if "__pycache__" not in s.parts]
    unlisted = sorted(s for s in scripts if f"`{s}`" not in index)
    assert not unlisted, f"bench/README.md does not list: {unlisted}"
