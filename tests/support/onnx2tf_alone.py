"""onnx2tf for the ONNX import tests, installed as `pipeline import` tells a user to.

    folder = onnx2tf_folder(tmp_path_factory)   # None where the environment has onnx2tf already

The `import` extra cannot hold onnx2tf (pyproject.toml says why, in numbers). The command
`pipeline import` prints for it (pipeline/importing/install_command.py) is run once per session (or CI run), with
`--target` into a folder of its own so the test venv stays as the user's `.[host,test]` made it; the tests' processes
find it on PYTHONPATH.
"""
from __future__ import annotations

import importlib.metadata
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.support.registry import unreached
from tests.support.session_cache import built_once, session_root


def _install(folder: Path) -> None:
    from pipeline.importing.install_command import import_install_command

    command = shlex.split(import_install_command(["onnx2tf"]))  # python -m pip install --no-deps onnx2tf==1.29.24
    done = subprocess.run([*command, "--quiet", "--target", str(folder)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and unreached(done.stderr):
        pytest.skip(f"the package registry could not be reached ({unreached(done.stderr)})")
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr[-2000:]}"


def onnx2tf_folder(tmp_path_factory) -> Optional[Path]:
    """The folder holding onnx2tf installed alone, or None when this environment has it."""
    try:  # installed in this environment (its metadata on sys.path; a module imported from the folder earlier is not)
        importlib.metadata.distribution("onnx2tf")
        return None
    except importlib.metadata.PackageNotFoundError:
        pass
    given = os.environ.get("EDGEFLOW_ENVS")
    root = Path(given) if given else session_root(tmp_path_factory)
    root.mkdir(parents=True, exist_ok=True)
    return built_once(root / f"onnx2tf-alone-py{sys.version_info[0]}{sys.version_info[1]}", _install)
