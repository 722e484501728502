"""A signal delivered at one exact moment: the instant a temporary file or folder has been made.

That instant is where a signal used to leave a temporary behind (CI once saw a lock holder's `.tmp` stay after
a SIGTERM); a test that waits for a `.tmp` to appear and then signals hits it only by chance. Shared by the
device tests (edge.atomic) and the host's (the run's lock, staged folders).
"""
from __future__ import annotations

import os
import signal
import tempfile
from contextlib import contextmanager
from typing import Iterator, Type


class Terminated(Exception):
    """What SIGTERM raises during the test (its default action would end pytest itself)."""


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
        yield KeyboardInterrupt if signum == signal.SIGINT else Terminated
    finally:
        monkeypatch.setattr(tempfile, maker, real)
        signal.signal(signal.SIGTERM, previous)
