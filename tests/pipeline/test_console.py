"""What a person sees on stderr: TF_CPP_MIN_LOG_LEVEL=2 or 3 (the usual advice to quiet TensorFlow) is never
noisier than setting nothing; only --verbose or a lower level (0, 1) shows TensorFlow's own lines.

Each case runs the real `pipeline export RUN --int8` in a fresh process (TensorFlow prints its start-up lines
once per process), on a copy of the tiny exported run.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.support.helpers import REPO, cli, quiet_env

# TensorFlow's own lines that an int8 export prints when nothing hides them: the C++ start-up and CUDA probing
# (absl's prefix "I0000 00:00..." / "E0000 ..."), the converter's "fully_quantize" and the interpreter's XNNPACK
# notice. At least one of these must reach --verbose's stderr.
TENSORFLOW_LINE = re.compile(r"^[IWE]\d{4} |fully_quantize|XNNPACK|absl::InitializeLog|cuInit|cudart")


def _env(level=None):
    env = quiet_env()
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    return env


def _lines(text: str) -> set:
    """stderr's lines with numbers (times, pids, addresses) blanked: the same message counts once."""
    return {re.sub(r"\d+(\.\d+)?", "N", line).strip() for line in text.splitlines() if line.strip()}


def _export(run_dir, tmp_path, name, env, verbose=False):
    target = tmp_path / name
    shutil.copytree(run_dir, target)
    result = cli((["--verbose"] if verbose else []) + ["export", str(target), "--int8"], env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.slow
@pytest.mark.host
def test_levels_2_and_3_are_as_quiet_as_the_default_and_verbose_shows_tensorflow(exported_run, tmp_path):
    default = _lines(_export(exported_run, tmp_path, "default", _env()).stderr)
    for level in ("2", "3"):
        extra = _lines(_export(exported_run, tmp_path, f"level{level}", _env(level)).stderr) - default
        assert not extra, f"TF_CPP_MIN_LOG_LEVEL={level} prints lines the default does not: {sorted(extra)[:8]}"
    verbose = _export(exported_run, tmp_path, "verbose", _env(), verbose=True).stderr
    shown = [line for line in verbose.splitlines() if TENSORFLOW_LINE.search(line)]
    assert shown, f"--verbose shows none of TensorFlow's lines; its stderr was:\n{verbose[-2000:]}"
    assert not [line for line in default if TENSORFLOW_LINE.search(line)], "the default shows TensorFlow's lines"


@pytest.mark.parametrize("level, quiet", [(None, True), ("2", True), ("3", True), (" 3", True), ("0", False),
                                          ("1", False)])
def test_which_levels_are_quiet(level, quiet):
    """The decision alone (no TensorFlow imported): quiet sets level 3 for TensorFlow; a lower level is kept."""
    code = ("import os; from pipeline import console; q = console.configure(False); "
            "print(q, os.environ.get('TF_CPP_MIN_LOG_LEVEL'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(level), cwd=REPO,
                         timeout=120, check=True).stdout.split()
    assert out == ([str(quiet), "3"] if quiet else [str(quiet), level])


def test_verbose_is_never_quiet():
    code = "from pipeline import console; print(console.configure(True))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env("3"), cwd=REPO,
                         timeout=120, check=True).stdout.split()
    assert out == ["False"]


# A refusal that needs no TensorFlow answers without importing it (seconds of CPU a refusal, and a user waits for
# them): each command's own checks of the run folder, the manifest, the options and the files come first.
REFUSED_WITHOUT_TENSORFLOW = {
    "export of a folder that is not a run": (["export", "{tmp}/nowhere", "--int8"], "is not a run directory"),
    "export with two modes": (["export", "{tmp}/nowhere", "--int8", "--float16"], "expected at most one mode"),
    "parity of a folder that is not a run": (["parity", "{tmp}/nowhere"], "is not a run directory"),
    "predict of a folder that is not a run": (["predict", "{tmp}/nowhere", "--data", "digits", "--out", "{tmp}/p.csv"],
                                               "is not a run directory"),
    "train with zero epochs": (["train", "--data", "digits", "--epochs", "0", "--out", "{tmp}/run"], "epochs 0, expected at least 1"),
    "train with a missing weights file": (["train", "--data", "digits", "--weights", "{tmp}/w.h5", "--out", "{tmp}/run"],
                                          "w.h5 not found"),
    "run with zero epochs": (["run", "--epochs", "0", "--out", "{tmp}/run"], "epochs 0, expected at least 1"),
    "report of a folder that is not a run": (["report", "{tmp}/nowhere"], "is not a run directory"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_WITHOUT_TENSORFLOW))
def test_a_refusal_answers_without_importing_tensorflow(case, tmp_path):
    args, needle = REFUSED_WITHOUT_TENSORFLOW[case]
    args = [a.format(tmp=tmp_path) for a in args]
    code = ("import sys\nfrom click.testing import CliRunner\nfrom pipeline.cli import main\n"
            f"result = CliRunner().invoke(main, {args!r})\n"
            "print(result.exit_code, 'tensorflow' in sys.modules)\nprint(result.output)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=REPO,
                         timeout=300, check=True).stdout
    assert needle in out, out
    assert out.split()[:2] == ["1", "False"], f"refused with TensorFlow imported (or not refused):\n{out}"
