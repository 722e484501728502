"""edge.files.bounded's JSON reading: a deeply nested file is refused in one line whatever recursion limit the process
runs under (a library may raise it for the whole process: onnx2tf sets 2**31 - 1 when imported)."""
from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.setrecursionlimit(2**31 - 1)
from edge.files.bounded import loads_json
try:
    loads_json("[" * 100_000 + "]" * 100_000, "deep.json", ValueError)
except ValueError as err:
    print(err)
print(sys.getrecursionlimit())
"""


def test_deep_json_is_refused_under_a_raised_recursion_limit_and_the_limit_is_restored():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # not -11, a segmentation fault
    assert done.stdout.splitlines() == ["deep.json is nested deeper than 64 levels; expected JSON", str(2**31 - 1)]
