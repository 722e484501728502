"""edge/ imports without TensorFlow, on Python 3.9 syntax, and picks interpreters in the documented order."""
from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

EDGE = Path(__file__).resolve().parents[2] / "edge"


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _numpy2() -> bool:
    import numpy

    return int(numpy.__version__.split(".")[0]) >= 2


def _expected_backend(blocked=()):
    if "tflite_runtime" not in blocked and _installed("tflite_runtime") and not _numpy2():
        return "tflite_runtime"
    if "ai_edge_litert" not in blocked and _installed("ai_edge_litert"):
        return "ai_edge_litert"
    if "tensorflow" not in blocked and _installed("tensorflow"):
        return "tensorflow.lite"
    return None


PROBE = """
import json, sys
for name in {blocked!r}:
    sys.modules[name] = None  # find_spec() then reports the module as absent
import edge, edge.cli
before = "tensorflow" in sys.modules
try:
    backend = edge.load_backend().name
    interpreter = edge.make_interpreter({model!r})
except edge.EdgeError as err:
    backend = "error: " + str(err)
print(json.dumps({{"tf_at_import": before, "backend": backend, "tf_after": "tensorflow" in sys.modules}}))
"""


def test_import_and_load_do_not_import_tensorflow_when_another_interpreter_is_there():
    from tests.support.edge_paths import INT8

    expected = _expected_backend()
    if expected in (None, "tensorflow.lite"):
        pytest.skip("only tensorflow.lite is installed here")
    got = _run(PROBE.format(blocked=(), model=str(INT8)))
    assert got == {"tf_at_import": False, "backend": expected, "tf_after": False}


def test_backend_order_skips_missing_interpreters():
    from tests.support.edge_paths import INT8

    blocked = ("tflite_runtime",)
    got = _run(PROBE.format(blocked=blocked, model=str(INT8)))
    expected = _expected_backend(blocked)
    if expected is None:
        assert got["backend"].startswith("error: no TFLite interpreter found")
    else:
        assert got["backend"] == expected
        assert got["tf_after"] == (expected == "tensorflow.lite")


def test_no_interpreter_is_a_clear_error():
    got = _run(PROBE.format(blocked=("tflite_runtime", "ai_edge_litert", "tensorflow"), model="unused"))
    assert got["backend"].startswith("error: no TFLite interpreter found (tried tflite_runtime, ai_edge_litert, tensorflow.lite)")
    assert "pip install" in got["backend"]


@pytest.mark.host
def test_tensorflow_lite_is_the_last_resort():
    from tests.support.edge_paths import INT8

    got = _run(PROBE.format(blocked=("tflite_runtime", "ai_edge_litert"), model=str(INT8)))
    assert got["backend"] == "tensorflow.lite" and got["tf_after"] is True


def test_edge_sources_are_python39_and_never_import_tensorflow_at_module_level():
    for path in sorted(EDGE.glob("*.py")):
        source = path.read_text()
        tree = ast.parse(source, filename=str(path), feature_version=(3, 9))
        assert ast.get_docstring(tree), f"{path.name} has no module docstring"
        for node in tree.body:  # module level only: a lazy import inside a function is allowed
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "tensorflow" or n.startswith("tensorflow.") for n in names), f"{path.name} imports tensorflow at module level"
        if path.name != "__init__.py" or "import" in source:
            assert "from __future__ import annotations" in source, f"{path.name} lacks `from __future__ import annotations` (Python 3.9)"
