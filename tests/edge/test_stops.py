"""Ctrl-C and SIGTERM end a command even when Python drops the exception the signal raised.

Python runs a signal's handler wherever the main thread is, a finalizer (`__del__`) included, and an exception a
finalizer raises is printed and dropped ("Exception ignored in ..."). CI once saw `pipeline train`, sent SIGTERM
mid-training, finish every epoch and exit 0. These tests put the signal inside a finalizer on purpose.
"""
from __future__ import annotations

import pytest

from signal_moments import run_with_signal_in_finalizer


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
