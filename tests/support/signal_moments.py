"""A signal delivered at one exact moment: the instant a temporary file or folder has been made, or inside a
finalizer.

The first instant is where a signal used to leave a temporary behind (CI once saw a lock holder's `.tmp` stay after
a SIGTERM); a test that waits for a `.tmp` to appear and then signals hits it only by chance. Shared by the
device tests (edge.files.atomic) and the host's (the run's lock, staged folders).

These tests check what Ctrl-C does at a terminal, so they give SIGINT that meaning however pytest was started
(`ctrl_c_as_at_a_terminal`).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Type

REPO = Path(__file__).resolve().parents[2]


class Terminated(Exception):
    """What SIGTERM raises during the test (its default action would end pytest itself)."""


@contextmanager
def ctrl_c_as_at_a_terminal() -> Iterator[None]:
    """Within the block, SIGINT raises KeyboardInterrupt in this process, and a process started here begins with
    SIGINT at its default, as at a terminal. Only needed when pytest was started with SIGINT ignored (a background
    job of a shell without job control, `nohup`): Python then installs no handler, and children inherit the
    ignoring through exec. The commands themselves keep an ignored SIGINT ignored: whoever started them asked for it."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)  # exec resets a handler to the default, not SIG_IGN
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def signal_when_made(monkeypatch, maker: str, signum: int) -> Iterator[Type[BaseException]]:
    """Within the block, tempfile.`maker` (mkstemp or mkdtemp) sends `signum` to this process once, right after
    making its file or folder, before returning its name. Yields the exception the signal raises."""
    real = getattr(tempfile, maker)
    sent = []

    def make_then_signal(*args, **kwargs):
        made = real(*args, **kwargs)
        if not sent:
            sent.append(signum)
            os.kill(os.getpid(), signum)  # Python runs the handler at its next check, before `made` is returned
        return made

    def terminated(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    monkeypatch.setattr(tempfile, maker, make_then_signal)
    try:
        with ctrl_c_as_at_a_terminal():
            yield KeyboardInterrupt if signum == signal.SIGINT else Terminated
    finally:
        monkeypatch.setattr(tempfile, maker, real)
        signal.signal(signal.SIGTERM, previous)


# `SignalsWhenFreed()`, freed at once, sends the signal to its own process and runs Python steps before returning:
# the handler runs inside the finalizer, where Python prints the exception it raises and drops it.
_SIGNALS_WHEN_FREED = """
import os, signal

class SignalsWhenFreed:
    def __del__(self):
        os.kill(os.getpid(), signal.{signum})
        for _ in range(10000):
            pass
"""


def run_with_signal_in_finalizer(script: str, signum: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `script` (indented as in a test is fine) in a new interpreter, in the repository, with `SignalsWhenFreed`
    defined; `signum` is "SIGTERM" or "SIGINT"."""
    source = _SIGNALS_WHEN_FREED.format(signum=signum) + textwrap.dedent(script)
    with ctrl_c_as_at_a_terminal():
        return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, cwd=REPO, timeout=timeout)
