"""The exact command that installs what `pipeline import` of an ONNX model needs, on the Python running it.

    import_install_command(["onnx2tf"])   # 'python3.11 -m pip install --no-deps onnx2tf==1.29.24' on 3.10 and 3.11

On Python 3.12 and 3.13 the package's `import` extra holds all of it (onnx2tf 2.x). On 3.10 and 3.11 the newest
onnx2tf, 1.29.24, pins TensorFlow 2.19 exactly, which the host's TensorFlow 2.21 cannot meet (pyproject.toml), so it
is installed on its own without its pins: the one piece the extra cannot hold there.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Sequence, Tuple

ONNX2TF_WITHOUT_PINS = "onnx2tf==1.29.24"  # before Python 3.12 (onnx2tf 2.x needs 3.12)
EXTRA_HOLDS_ONNX2TF = (3, 12)


def _source_tree() -> str:
    """The checkout this package is installed from (editable), as pip is told it, or the package's name."""
    root = Path(__file__).resolve().parents[2]
    return shlex.quote(f"{root}[host,import]") if (root / "pyproject.toml").is_file() else "'edgeflow[host,import]'"


def import_install_command(missing: Sequence[str], version: Tuple[int, int] = tuple(sys.version_info[:2])) -> str:
    """The command that installs MISSING (module names) for `pipeline import` of an ONNX model."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    extra = f"{pip} -e {_source_tree()}"
    if version >= EXTRA_HOLDS_ONNX2TF:
        return extra
    alone = f"{pip} --no-deps {ONNX2TF_WITHOUT_PINS}"
    return alone if list(missing) == ["onnx2tf"] else f"{extra} && {alone}"
