"""One writer per run directory: a stage that writes a run holds `RUN/.lock` for its whole life.

    with hold(run_dir, "pipeline export"):
        ...  # a second writer on the same run is refused at once, naming this stage and process

The lock is an OS lock (flock, through the maintained `filelock` package), so a lock left by a process
that died is released by the kernel and never blocks. Beside it, `RUN/.lock.holder.json` names the
holder (stage, pid, host, start time) for the refusal message; it is information only, never the lock.
Nested holds in one process (`pipeline run` holding the run while it calls each stage) just count.

Taking the lock is when a run is recovered: a transaction a dead writer left unfinished is finished or
rolled back, and its leftovers removed (journal.recover), before the holder does anything else.

`RUN/.lock` is never removed, not even from a folder a failed stage leaves otherwise empty: a process that
opened the file just before it was unlinked would lock an inode no path leads to any more, while the next
one locks a new file at the same path, and both would write the run.
"""
from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, Tuple

from filelock import FileLock, Timeout

from pipeline.errors import RunBusy
from pipeline.rundir import journal
from pipeline.rundir.files import signals_held, write_json_atomic

LOCK_NAME = ".lock"
HOLDER_NAME = ".lock.holder.json"

_held: Dict[Path, Tuple[FileLock, int]] = {}  # run dir -> (its lock, nesting depth) in this process


@contextmanager
def hold(run_dir: Path, stage: str) -> Iterator[None]:
    """Hold RUN's writer lock while the body runs; RunBusy when another process holds it."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _held:
        lock, depth = _held[run_dir]
        _held[run_dir] = (lock, depth + 1)
        try:
            yield
        finally:
            _held[run_dir] = (lock, _held[run_dir][1] - 1)
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(run_dir / LOCK_NAME), timeout=0)
    holder = run_dir / HOLDER_NAME
    acquired = False
    try:
        # Taking the lock and naming the holder, and later undoing both, are each one step for Ctrl-C and SIGTERM:
        # a signal between the two would leave a holder's note (or its temporary file) with no holder.
        with signals_held():
            try:
                lock.acquire()
            except Timeout:
                raise RunBusy(f"{run_dir} is being written by {_holder(run_dir)}; one stage writes a run at a time. "
                              "Wait for it to finish (or stop it), then run this command again; nothing was changed") from None
            acquired = True
            _held[run_dir] = (lock, 1)
            _name_holder(holder, stage)
            journal.recover(run_dir)
        yield
    finally:
        if acquired:
            with signals_held():
                del _held[run_dir]
                holder.unlink(missing_ok=True)
                lock.release()


def held_here(run_dir: Path) -> bool:
    """Whether this process holds RUN's lock."""
    return Path(run_dir).resolve() in _held


def _name_holder(holder: Path, stage: str) -> None:
    # Atomically: a second writer reading it to name this one never sees it half written.
    write_json_atomic(holder, {"stage": stage, "pid": os.getpid(), "host": socket.gethostname(),
                               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def _holder(run_dir: Path) -> str:
    try:
        info = json.loads((run_dir / HOLDER_NAME).read_text())
        return f"`{info['stage']}` (process {info['pid']} on {info['host']}, since {info['started']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (it has not named itself yet)"
