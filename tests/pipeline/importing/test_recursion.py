"""Importing onnx2tf sets Python's recursion limit to the C int maximum; `pipeline import` puts it back, so a file
nested 100,000 deep read later in the same process is still a one-line refusal (RecursionError in json's decoder)
and not a crashed process (a C stack overflow: it killed a pytest worker, test_hostile_data, after an in-process
import test)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.helpers import REPO, quiet_env
from tests.pipeline.importing.test_onnx import TINY_CLASSIFIER, converter  # noqa: F401  (onnx2tf on the path, as in those tests)

pytestmark = [pytest.mark.host, pytest.mark.slow]

CHILD = """
import sys
from pathlib import Path
import onnx
from edge.files.bounded import loads_json
from pipeline.errors import ConfigError
from pipeline.importing import onnx_file

before = sys.getrecursionlimit()
onnx_file._check_ops(onnx.load(sys.argv[1]), Path(sys.argv[1]))  # looks up onnx2tf's converters: imports onnx2tf
assert "onnx2tf" in sys.modules
try:
    loads_json("[" * 100_000 + "]" * 100_000, "deep.json", ConfigError)
except ConfigError as err:
    print(before, sys.getrecursionlimit(), err)
"""


def test_the_recursion_limit_survives_onnx2tf(converter):
    done = subprocess.run([sys.executable, "-c", CHILD, str(TINY_CLASSIFIER)], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env=quiet_env())
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    before, after, message = done.stdout.split(" ", 2)
    assert before == after and "deep.json is nested deeper than" in message, done.stdout
