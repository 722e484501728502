"""Which way pipeline/'s imports go: no cycle, and no domain module importing a stage (read from the source with ast,
imports inside functions included, so a lazy import cannot hide one)."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

REPO = Path(__file__).resolve().parents[1]
# The stage level: one module per command, the command lines, and the report every stage rewrites.
STAGES = {f"pipeline.{name}" for name in ("prepare", "train", "export", "compile", "parity", "predict", "end_to_end",
                                          "cli", "__main__")}


def _is_stage(module: str) -> bool:
    return module in STAGES or module == "pipeline.report" or module.startswith("pipeline.report.")


def _modules(package: str) -> Dict[str, Path]:
    modules = {}
    for path in (REPO / package).rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(module: str, path: Path, known: Set[str]) -> Set[str]:
    """The modules of `known` that `module` imports: `from a import b` is a.b when that is a module, else a."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    found.add(full)
                elif base in known:
                    found.add(base)
    found.discard(module)
    return found


def _graph(*packages: str) -> Dict[str, Set[str]]:
    modules = {name: path for package in packages for name, path in _modules(package).items()}
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    groups = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_the_walk_finds_the_imports_it_is_about():
    """The walk sees lazy imports and `from package import module`: a check that found nothing would prove nothing."""
    graph = _graph("pipeline", "edge", "models")
    assert "pipeline.parity" in graph["pipeline.end_to_end"]  # imported inside run()
    assert "pipeline.inference.bundle" in graph["pipeline.cli"]  # imported inside parity_command()
    assert "pipeline.tasks.classify.disagreements" in graph["pipeline.tasks.classify.parity"]  # from pipeline.inference import disagreements
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    assert _cycles(_graph("pipeline", "edge", "models")) == []


def test_no_domain_module_imports_a_stage():
    """Stages (one module per command, the CLI, the report) use the domains below them, never the other way."""
    upward = {module: sorted(m for m in imported if _is_stage(m))
              for module, imported in _graph("pipeline").items() if not _is_stage(module)}
    assert {module: stages for module, stages in upward.items() if stages} == {}


def test_edge_and_models_import_nothing_of_the_others():
    """`pipeline` may import `models` and `edge`; `edge` (the device side) and `models` import neither of the others."""
    graph = _graph("pipeline", "edge", "models")
    leaks = {module: sorted(m for m in imported if m.split(".")[0] != module.split(".")[0])
             for module, imported in graph.items() if module.split(".")[0] in ("edge", "models")}
    assert {module: found for module, found in leaks.items() if found} == {}
