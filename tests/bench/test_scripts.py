"""The benchmark scripts hold together without running them: each compiles, each import of ours names a module and a
name that exist, each bench/ path they and the results files quote is in the tree, and bench/ holds families in
folders, no loose scripts. Read from source (ast): nothing here imports TensorFlow or runs a benchmark.
"""
from __future__ import annotations

import ast
import importlib.util
import py_compile
import sys
from pathlib import Path

import pytest

from tests.docs.test_docs_paths import CITED
from tests.support.helpers import REPO

BENCH = REPO / "bench"
SCRIPTS = sorted(p for p in BENCH.rglob("*.py") if "__pycache__" not in p.parts)
RESULTS = sorted((BENCH / "results").glob("*.md"))
# Our own sources outside bench/: their comments and docstrings point at the benchmark that measured a choice.
SOURCES = sorted(p for top in ("pipeline", "edge", "models", "tests", ".ci") for p in (REPO / top).rglob("*")
                 if p.is_file() and p.suffix in ("", ".py", ".sh") and "__pycache__" not in p.parts)
# The packages of this repository a bench script may import (bench's own folders included, as bench.<family>.<module>).
OURS = {"bench", "edge", "models", "pipeline", "tests"}
# Modules that only the other environments a benchmark drives have (the device venv, the clients' venvs, Ultralytics'
# venvs): their imports run there, never in the host venv these tests run in.
ELSEWHERE = {"mediapipe", "tflite_runtime", "pycoral", "ultralytics", "torch", "torchvision"}
# A results file names the script that produced a result once, by the path it had then: "(then bench/old.py)".
THEN = "(then "


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix() if REPO in path.parents else path.as_posix()


def _module_file(dotted: str):
    """The file (or package folder) of one of our modules, from its dotted name, or None when there is none."""
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return base if base.is_dir() else None  # a folder without __init__.py: a namespace package (bench's families)


def _top_level_names(path: Path) -> set:
    """The names a module binds at its top level (definitions, assignments, imports, also inside top-level if/try),
    or None when it may bind any (a star import, a module __getattr__)."""
    names = set()
    body = list(ast.parse(path.read_text(), str(path)).body)
    while body:
        node = body.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if node.name == "__getattr__":
                return None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            body.extend(node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
                        + [s for h in getattr(node, "handlers", []) for s in h.body])
    return names


def _unresolved(script: Path) -> list:
    """Every import in `script` (functions' own included) that would not resolve when it runs as
    `python bench/<family>/<script>.py` with the repository on sys.path."""
    problems = []
    tree = ast.parse(script.read_text(), str(script))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            wanted = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in wanted:
            top = module.split(".")[0]
            where = f"{_rel(script)}:{node.lineno}"
            if top in OURS:
                found = _module_file(module)
                if found is None:
                    problems.append(f"{where}: no module {module}")
                elif name and name != "*" and _module_file(f"{module}.{name}") is None:
                    names = _top_level_names(found) if found.suffix == ".py" else set()
                    if names is not None and name not in names:
                        problems.append(f"{where}: {module} defines no {name}")
            elif (script.parent / f"{top}.py").is_file() or (script.parent / top).is_dir():
                continue  # beside the script: its folder is sys.path[0] when it runs
            elif top not in sys.stdlib_module_names and top not in ELSEWHERE and importlib.util.find_spec(top) is None:
                problems.append(f"{where}: {module} is neither ours, nor beside the script, nor installed")
    return list(dict.fromkeys(problems))  # once each, not once per name imported


def _quoted_bench_paths(text: str) -> set:
    """The bench/... paths a text quotes, but for the one a results file names as a script's earlier path."""
    return {m.group(1) for m in CITED.finditer(text)
            if m.group(1).startswith("bench/") and not text[:m.start()].endswith(THEN)}


def _missing(paths) -> list:
    return sorted(p for p in paths if not (list(REPO.glob(p)) if "*" in p else (REPO / p).exists()))


@pytest.mark.parametrize("script", SCRIPTS, ids=_rel)
def test_every_bench_script_compiles(script, tmp_path):
    py_compile.compile(str(script), cfile=str(tmp_path / "compiled.pyc"), doraise=True)


@pytest.mark.parametrize("script", SCRIPTS, ids=_rel)
def test_every_import_of_a_bench_script_resolves(script):
    problems = _unresolved(script)
    assert not problems, "\n".join(problems)


def test_an_import_of_a_moved_or_misspelt_module_or_name_is_found(tmp_path):
    # What the check above must catch: the flat layout's sibling import, a module that is not there, a name that is not.
    script = tmp_path / "bench" / "edge" / "stale.py"
    script.parent.mkdir(parents=True)
    script.write_text("def run():\n    from bench_edge_speed import MODEL\n    from bench.edge.speeds import MODEL\n"
                      "    from bench.edge.speed import NO_SUCH_NAME\n    from bench.edge.speed import MODEL, cpu_info\n")
    problems = _unresolved(script)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "bench_edge_speed is neither ours, nor beside the script, nor installed",
        "no module bench.edge.speeds", "bench.edge.speed defines no NO_SUCH_NAME"]


@pytest.mark.parametrize("page", RESULTS + SCRIPTS, ids=_rel)
def test_every_bench_path_a_results_file_or_script_quotes_exists(page):
    # README.md, bench/README.md and docs/ are checked by tests/docs/test_docs_paths.py.
    missing = _missing(_quoted_bench_paths(page.read_text()))
    assert not missing, f"{_rel(page)} quotes bench paths that are not in the tree: {missing}"


def test_every_bench_path_our_sources_quote_exists():
    # This file's own examples of a wrong path excepted.
    missing = {_rel(page): found for page in SOURCES if page != Path(__file__) and (found := _missing(_quoted_bench_paths(page.read_text(errors="replace"))))}
    assert not missing, f"sources quote bench paths that are not in the tree: {missing}"


def test_a_quoted_path_that_is_not_there_is_found_and_an_earlier_name_is_not_checked():
    text = ("Command: `.venv/bin/python bench/edge/speed.py run` (then bench/bench_edge_speed.py)\n"
            "see bench/edge/spede.py and bench/results/*.md")
    assert _missing(_quoted_bench_paths(text)) == ["bench/edge/spede.py"]


def test_bench_holds_no_loose_scripts_only_folders_of_families_and_its_readme():
    loose = sorted(p.name for p in BENCH.iterdir() if p.is_file() and p.name != "README.md")
    assert not loose, f"bench/ holds files outside a family folder: {loose}"
