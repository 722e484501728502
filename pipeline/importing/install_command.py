"""The exact command that installs what `pipeline import` of an ONNX model needs, on the Python running it.

    import_install_command(["onnx2tf"])   # '/path/to/python -m pip install --no-deps onnx2tf==1.29.24'

The package's `import` extra holds onnx and onnxruntime but cannot hold onnx2tf on any supported Python
(pyproject.toml says why, in numbers): onnx2tf is installed on its own, without its pins, the one release that runs
beside TensorFlow 2.21 on 3.10 to 3.13.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Sequence

ONNX2TF = "onnx2tf==1.29.24"  # its Requires-Python: >= 3.10.12


def _source_tree() -> str:
    """The checkout this package is installed from (editable), as pip is told it, or the package's name."""
    root = Path(__file__).resolve().parents[2]
    return shlex.quote(f"{root}[host,import]") if (root / "pyproject.toml").is_file() else "'edgeflow[host,import]'"


def import_install_command(missing: Sequence[str]) -> str:
    """The command that installs MISSING (module names) for `pipeline import` of an ONNX model."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    alone = f"{pip} --no-deps {ONNX2TF}"
    return alone if list(missing) == ["onnx2tf"] else f"{pip} -e {_source_tree()} && {alone}"
