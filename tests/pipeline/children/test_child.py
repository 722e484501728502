"""A step run in a child process (pipeline/children/child.py, the remedy ladder's rungs): its result or its own error
comes back; a child that ends without a result is one PipelineError line naming how it ended; Ctrl-C in the parent
ends the child too; a child starts with TensorFlow already imported (forked from the fork server). Each child here
runs a standard-library function; the fork server's one import of TensorFlow (about 10 s, once per process) is the
file's cost, shared with every later child of the same test process (the export and remedy tests')."""
from __future__ import annotations

import multiprocessing
import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.errors import PipelineError
from pipeline.children import child


def test_the_result_and_the_childs_own_error_come_back():
    assert child.call(operator.add, 2, 3, what="adding") == 5
    with pytest.raises(ValueError, match="invalid literal"):
        child.call(int, "not a number", what="parsing")


def _imported(name: str) -> bool:
    return name in sys.modules


def test_a_child_starts_with_tensorflow_already_imported():
    # A spawned child would import TensorFlow again first (about 10 s a child); a forked one has it from the server.
    assert child.call(_imported, "tensorflow", what="looking") and child.call(_imported, "tf_keras", what="looking")


def test_a_folder_named_like_ours_where_the_command_runs_is_not_imported_by_the_children(tmp_path):
    # A user's own folder named `pipeline` where they run the command: neither the fork server nor a child imports it.
    marker = tmp_path / "decoy-imported"
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    repo = str(Path(__file__).resolve().parents[3])
    script = (f"import os, sys; sys.path.insert(0, {repo!r})\n"
              "from pipeline.quant import child\n"
              "from tests.pipeline.children.test_child import _imported\n"
              "os.chdir(sys.argv[1])\n"
              "print(child.call(_imported, 'tensorflow', what='looking'))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists(), "the folder where the command ran was imported in place of the package"
    assert done.stdout.split() == ["True"]  # the server's own imports came from the package, not the decoy


def _kill_self():  # as the kernel's out-of-memory killer would
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("function, args, how", [(os._exit, (3,), "exit code 3"),
                                                 (_kill_self, (), "killed by SIGKILL, perhaps out of memory")])
def test_a_child_that_ends_without_a_result_is_one_line_naming_how(function, args, how):
    with pytest.raises(PipelineError) as caught:
        child.call(function, *args, what="the qat-2 rung's fine-tuning")
    message = str(caught.value)
    assert "\n" not in message and caught.value.__cause__ is None
    assert message == f"the qat-2 rung's fine-tuning ended without a result ({how}); nothing of it was written"


def test_ctrl_c_in_the_parent_ends_the_child():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            child.call(time.sleep, 60, what="sleeping")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - start < 30 and multiprocessing.active_children() == []
