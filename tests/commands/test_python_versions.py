"""The Pythons each side runs on: `pipeline` refuses, in one line, a Python its TensorFlow has no wheel for (the package
itself installs on 3.9 for the device side); `pipeline import` names the exact command that installs what an ONNX
import lacks, for the Python running it; pyproject's range is the one the docs state."""
from __future__ import annotations

import re
import subprocess
import sys
import shlex
from pathlib import Path

import pytest

from pipeline.importing.install_command import import_install_command
from pipeline.python_range import HOST_PYTHONS, unsupported
from tests.support.helpers import REPO, quiet_env, write_class_folders


def test_the_host_range_is_3_10_to_3_13_and_the_package_allows_the_device_3_9():
    from packaging.specifiers import SpecifierSet

    assert HOST_PYTHONS == ((3, 10), (3, 13))
    assert [unsupported(v) == "" for v in ((3, 9, 18), (3, 10, 0), (3, 13, 0), (3, 14, 0))] == [False, True, True, False]
    message = unsupported((3, 9, 18))
    assert "\n" not in message and "needs Python 3.10 to 3.13" in message and "Python 3.9.18" in message
    given = re.search(r'^requires-python = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    allowed = SpecifierSet(given)
    assert [v in allowed for v in ("3.8", "3.9", "3.13", "3.14")] == [False, True, True, False]


@pytest.mark.slow  # builds the device venv when no test of this session has (about 2 minutes)
def test_pipeline_on_the_device_python_refuses_in_one_line(tmp_path_factory, tmp_path):
    """The device venv (Python 3.9, `.[edge,test]`) has the `pipeline` command too: it says which Python it needs."""
    from tests.support.device_env import shared_env

    pipeline = shared_env(tmp_path_factory, "edge-env") / "bin" / "pipeline"
    done = subprocess.run([str(pipeline), "run", "--out", str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=120, env=quiet_env())
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr[-2000:])
    assert re.fullmatch(r"error: pipeline \(the host side\) needs Python 3\.10 to 3\.13, and this is Python 3\.9\.\d+ .*\n",
                        done.stderr), done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("missing, expected", [
    (["onnx2tf"], "{py} -m pip install --no-deps onnx2tf==1.29.24"),
    (["onnx", "onnx2tf"], "{py} -m pip install -e {tree} && {py} -m pip install --no-deps onnx2tf==1.29.24"),
])
def test_the_install_command_names_this_python_and_the_checkout(missing, expected):
    tree = shlex.quote(f"{REPO}[host,import]")
    assert import_install_command(missing) == expected.format(py=shlex.quote(sys.executable), tree=tree)


HIDDEN = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # as if not installed: importlib.util.find_spec answers None
from pipeline.__main__ import main
sys.argv[1:] = sys.argv[2:]
main()
"""


@pytest.mark.host
def test_pipeline_import_without_onnx2tf_prints_the_command_and_writes_nothing(tmp_path):
    data = write_class_folders(tmp_path / "shapes", per_class=3)
    run = tmp_path / "run"
    model = REPO / "tests" / "fixtures" / "tiny_classifier.onnx"
    done = subprocess.run([sys.executable, "-c", HIDDEN, "onnx2tf", "import", str(model), "--data", str(data), "--out",
                           str(run)], capture_output=True, text=True, timeout=300, env=quiet_env(), cwd=REPO)
    assert 0 < done.returncode < 128 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "onnx2tf not installed; install with: " in lines[0], done.stderr[-2000:]
    assert lines[0].endswith(import_install_command(["onnx2tf"])), lines[0]
    assert not run.exists() or not (run / "manifest.json").exists()


def test_one_distribution_owns_the_tflite_reader():
    """edge/ parses models with the `tflite` package; ai-edge-litert 2.1.2 (onnx2tf 2.x's pin) ships a `tflite/`
    package of its own over it, which breaks every export: whatever was installed here, `tflite` is the only owner
    of its files, and its reader is the one imported."""
    import importlib.metadata

    import tflite

    owners = sorted({d.metadata["Name"] for d in importlib.metadata.distributions()
                     if any(f.parts[:2] == ("tflite", "__init__.py") for f in (d.files or ()))})
    assert owners == ["tflite"], f"distributions that each install site-packages/tflite/__init__.py: {owners}"
    assert hasattr(tflite, "Model")
