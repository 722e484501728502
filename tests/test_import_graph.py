"""Which way the imports go (read from the source with ast, imports inside functions included, so a lazy import cannot
hide one): no cycle; no two packages importing each other; the shared layers below the stages and tasks, never above;
no task or head named outside its own folder; a task imports no other task but the one it declares it builds on;
`edge` and `models` import nothing of the others.

The layers of pipeline/, top down (docs/architecture.md):
  stages        one module per command (pipeline/<stage>.py), the CLI
  tasks         pipeline/tasks/<task>/ (each task's own modules and its heads), behind the registry pipeline/tasks/*.py
  shared layers every other package and module of pipeline/: the run directory, data, training, quantization, the
                remedy ladder, the Edge TPU, the parity and report skeletons, ...; they name no task and no head.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set, Tuple

REPO = Path(__file__).resolve().parents[1]
# The stage level: one module per command, the command lines.
STAGES = {f"pipeline.{name}" for name in ("prepare", "train", "import_model", "export", "compile", "parity", "predict",
                                          "end_to_end", "cli", "__main__")}
TASKS_DIR = REPO / "pipeline" / "tasks"


def _task_names() -> Set[str]:
    """The registered tasks: the folders of pipeline/tasks/ holding a task.py."""
    return {path.parent.name for path in TASKS_DIR.glob("*/task.py")}


def _builds_on(task: str) -> Set[str]:
    """The tasks `task` declares it builds on: BUILDS_ON, a tuple of names, in its package's __init__.py (pose's model
    is a detector with keypoints, so the pose task builds on detect's heads and data; the reverse is an import cycle
    between two task folders, which test_no_two_packages_import_each_other refuses)."""
    init = TASKS_DIR / task / "__init__.py"
    for node in ast.parse(init.read_text()).body if init.exists() else ():
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "BUILDS_ON" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def _head_names() -> Set[str]:
    """Every task's heads: the folders of pipeline/tasks/<task>/heads/."""
    return {path.name for path in TASKS_DIR.glob("*/heads/*") if (path / "__init__.py").exists()}


def _task_of(module: str) -> str:
    """The task whose package `module` is in ('' for any other module)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["pipeline", "tasks"] else ""


def _is_stage(module: str) -> bool:
    return module in STAGES


def _is_shared(module: str) -> bool:
    """A shared layer: pipeline/ below the stages, outside the task registry and the task packages."""
    parts = module.split(".")
    return parts[0] == "pipeline" and not _is_stage(module) and parts[:2] != ["pipeline", "tasks"] and module != "pipeline"


def _unit(module: str) -> str:
    """The package a module counts in for 'no two packages import each other': pipeline/<package>/ and edge/<group>/
    as a whole, a task's folder as a whole, and each module directly in pipeline/ or edge/ on its own."""
    parts = module.split(".")
    if parts[0] not in ("pipeline", "edge") or len(parts) == 1:
        return parts[0]
    if parts[:2] == ["pipeline", "tasks"] and len(parts) > 3:
        return ".".join(parts[:3])
    if (REPO / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


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
    assert "pipeline.tasks.classify.disagreements" in graph["pipeline.tasks.classify.parity"]  # from package import module
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _mutual({"p.a.x": {"p.b.y"}, "p.b.y": set(), "p.b.z": {"p.a.w"}, "p.a.w": set()},
                   lambda m: ".".join(m.split(".")[:2])) == [("p.a", "p.b")]
    assert {"classify", "detect"} <= _task_names() and {"ssd", "yolo"} <= _head_names()


def test_no_import_cycle():
    assert _cycles(_graph("pipeline", "edge", "models")) == []


def _mutual(graph: Dict[str, Set[str]], unit) -> List[Tuple[str, str]]:
    edges = {(unit(a), unit(b)) for a, imported in graph.items() for b in imported if unit(a) != unit(b)}
    return sorted((a, b) for a, b in edges if (b, a) in edges and a < b)


def test_no_two_packages_import_each_other():
    """A package that imports another and is imported back is one package in two folders: the layering has a hole."""
    assert _mutual(_graph("pipeline", "edge", "models"), _unit) == []


def test_imports_go_down_only():
    """Shared layers import no stage and no task package; a stage imports no task package (the registry chooses);
    a task imports no stage and no other task but those it declares it builds on."""
    graph = _graph("pipeline")
    wrong = {}
    for module, imported in graph.items():
        task = _task_of(module)
        for other in imported:
            if _is_shared(module) and (_is_stage(other) or _task_of(other)):
                wrong.setdefault(module, []).append(other)
            elif _is_stage(module) and _task_of(other):
                wrong.setdefault(module, []).append(other)
            elif task and (_is_stage(other) or _task_of(other) not in {"", task} | _builds_on(task)):
                wrong.setdefault(module, []).append(other)
    assert {module: sorted(found) for module, found in wrong.items()} == {}


def _names_in(path: Path, names: Set[str]) -> List[str]:
    """Where the source names one of `names`: a string constant equal to it, or an identifier containing it as a word
    (`_is_yolo`, `YOLO`, `detect_export`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
        elif isinstance(node, (ast.Name, ast.Attribute, ast.FunctionDef, ast.ClassDef, ast.alias)):
            name = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None) or ""
            words = set(name.lower().strip("_").split("_"))
            if words & names:
                found.append(f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)} {name}")
    return found


def test_no_task_or_head_named_in_a_shared_layer_or_a_stage():
    """A new task is a folder and a new head is a folder: nothing outside them asks which one it is."""
    names = _task_names() | _head_names()
    found = []
    for module, path in _modules("pipeline").items():
        if _is_shared(module) or _is_stage(module):
            found += _names_in(path, names)
    assert found == []


def test_no_head_named_outside_its_folder():
    """Inside a task, only the head's own folder and the heads' registry name a head. A task's data readers
    (pipeline/tasks/<task>/data/) are exempt: they read datasets by their layout's name, and a head may share that name
    without being it (Ultralytics' YOLO data.yaml layout trains either detector head)."""
    heads = _head_names()
    found = []
    for module, path in _modules("pipeline").items():
        parts = module.split(".")
        if _task_of(module) and parts[3:4] not in (["heads"], ["data"]):
            found += _names_in(path, heads)
    assert found == []


def test_edge_and_models_import_nothing_of_the_others():
    """`pipeline` may import `models` and `edge`; `edge` (the device side) and `models` import neither of the others."""
    graph = _graph("pipeline", "edge", "models")
    leaks = {module: sorted(m for m in imported if m.split(".")[0] != module.split(".")[0])
             for module, imported in graph.items() if module.split(".")[0] in ("edge", "models")}
    assert {module: found for module, found in leaks.items() if found} == {}
