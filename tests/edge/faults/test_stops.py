"""Ctrl-C and SIGTERM end a command even when Python drops the exception the signal raised.

Python runs a signal's handler wherever the main thread is, a finalizer (`__del__`) included, and an exception a
finalizer raises is printed and dropped ("Exception ignored in ..."). CI once saw `pipeline train`, sent SIGTERM
mid-training, finish every epoch and exit 0. These tests put the signal inside a finalizer on purpose.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.signal_moments import REPO, ctrl_c_as_at_a_terminal, run_with_signal_in_finalizer


@pytest.mark.parametrize("signum, code, said", [("SIGTERM", 143, "terminated (SIGTERM)"),
                                                ("SIGINT", 130, "interrupted (Ctrl-C)")])
def test_a_stop_a_finalizer_dropped_still_ends_the_command_with_its_code(signum, code, said):
    done = run_with_signal_in_finalizer("""
        from edge.errors import exits_cleanly

        @exits_cleanly()
        def command():
            SignalsWhenFreed()
            print("finished")

        command()
    """, signum)
    assert "Exception ignored" in done.stderr, done.stderr  # the case meant: Python did drop the exception
    assert done.stdout == "finished\n"  # the command itself ran on
    assert done.returncode == code, done.stderr
    assert f"{said} as the command finished: what it wrote is complete" in done.stderr


def test_a_loop_that_asks_stops_at_its_next_step():
    done = run_with_signal_in_finalizer("""
        from edge.errors import exits_cleanly, raise_if_stopped

        @exits_cleanly()
        def command():
            for step in range(5):
                print("step", step)
                if step == 1:
                    SignalsWhenFreed()
                raise_if_stopped()

        command()
    """, "SIGTERM")
    assert "Exception ignored" in done.stderr, done.stderr
    assert done.stdout == "step 0\nstep 1\n" and done.returncode == 143, (done.stdout, done.stderr)
    assert "terminated (SIGTERM): what this command was writing was rolled back" in done.stderr


def test_a_command_started_with_ctrl_c_ignored_keeps_it_ignored():
    """`nohup pipeline train ... &`, or a background job of a script, asks for Ctrl-C to be ignored: a command does
    not put a handler of its own back."""
    script = textwrap.dedent("""
        import os, signal
        from edge.errors import exits_cleanly

        signal.signal(signal.SIGINT, signal.SIG_IGN)

        @exits_cleanly()
        def command():
            os.kill(os.getpid(), signal.SIGINT)
            print("finished")

        command()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert (done.returncode, done.stdout) == (0, "finished\n"), done.stderr


# The Ctrl-C tests: one in this process (edge.files.atomic's held rename), one in a child (the finalizer above).
CTRL_C_TESTS = [
    "tests/edge/files/test_atomic_and_images.py::test_a_signal_while_writing_waits_for_the_rename_and_leaves_no_temporary",
    "tests/edge/faults/test_stops.py::test_a_stop_a_finalizer_dropped_still_ends_the_command_with_its_code",
]


def test_the_ctrl_c_tests_pass_when_pytest_was_started_with_ctrl_c_ignored(tmp_path):
    """Started from a background job of a script or by `nohup`, pytest and the processes it starts inherit SIGINT
    ignored; the Ctrl-C tests still check what Ctrl-C does at a terminal."""
    start_ignoring = ("import signal, sys, pytest; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                      "sys.exit(pytest.main(sys.argv[1:]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this session's worker settings
    done = subprocess.run([sys.executable, "-c", start_ignoring, "-q", "-p", "no:cacheprovider",
                           "--basetemp", str(tmp_path / "inner"), *CTRL_C_TESTS],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]


def test_a_command_run_in_process_leaves_no_handler_and_no_stop_behind():
    """Tests run commands in-process and later train in-process in the same worker. A command's SIGINT and SIGTERM
    handlers and its record of stops end with it: otherwise a Ctrl-C a later test sends to itself (and catches) is
    recorded as a stop, and the next training in that worker raises it at its first step (CI lost an xdist worker
    so: "[gw0] node down: keyboard-interrupt")."""
    script = textwrap.dedent("""
        import os, signal
        from edge.errors import InputError, exits_cleanly, raise_if_stopped

        before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        assert before[signal.SIGINT] is signal.default_int_handler

        @exits_cleanly(InputError)
        def refused():
            raise InputError("bad image")

        @exits_cleanly(InputError)
        def done():
            return "done"

        try:
            refused()
        except SystemExit as ended:
            assert ended.code == 1
        assert done() == "done"
        assert {s: signal.getsignal(s) for s in before} == before, "a command left its handlers behind"
        try:
            os.kill(os.getpid(), signal.SIGINT)  # a test's own Ctrl-C, which it catches
            for _ in range(10000):
                pass
        except KeyboardInterrupt:
            pass
        raise_if_stopped()  # what training calls at each step
        print("not stopped")
    """)
    with ctrl_c_as_at_a_terminal():
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert (done.returncode, done.stdout) == (0, "not stopped\n"), done.stderr[-3000:]


# In-process: commands run through click (they set handlers of their own while they run) and a Ctrl-C and a SIGTERM
# a test sends to its own process, in the same session: every test must leave its worker as it found it.
IN_PROCESS_SIGNAL_TESTS = [
    "tests/edge/test_cli.py::test_classify_uses_sidecar_labels",
    "tests/edge/test_cli.py::test_bad_inputs_exit_1_without_traceback",
    "tests/edge/files/test_atomic_and_images.py::test_a_signal_while_writing_waits_for_the_rename_and_leaves_no_temporary",
    "tests/edge/files/test_atomic_and_images.py::test_a_sigterm_while_writing_is_not_lost_behind_an_ignored_ctrl_c",
]


def test_signal_tests_under_xdist_with_ctrl_c_ignored_leave_every_worker_up(tmp_path):
    """The suite as CI starts it (`-n 2 --dist loadfile`) from `nohup`, a background job or `setsid nohup bash .ci/run
    &` (Ctrl-C ignored): no worker goes down and every test passes. Started from a terminal (Ctrl-C at its default)
    is how every other run of the suite starts, where tests/conftest.py's `signals_left_as_found` fails any test that
    leaves a handler or a stop behind."""
    start = ("import signal, sys, pytest; signal.signal(signal.SIGINT, signal.SIG_IGN); "
             "sys.exit(pytest.main(sys.argv[1:]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this session's worker settings
    with ctrl_c_as_at_a_terminal():
        done = subprocess.run([sys.executable, "-c", start, "-q", "-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider",
                               "--basetemp", str(tmp_path / "inner"), *IN_PROCESS_SIGNAL_TESTS],
                              capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    out = done.stdout + done.stderr
    assert "node down" not in out and "keyboard-interrupt" not in out, out[-3000:]
    assert done.returncode == 0 and "5 passed" in done.stdout, out[-3000:]
