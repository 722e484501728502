"""Artifacts built once per pytest session and shared by every xdist worker (a trained model, its exports).

    folder = built_once(session_root(tmp_path_factory) / "detector", train_and_export)

The first caller builds under a lock, in place (a run records its own folder), and writes a completion marker
beside the folder once the build has returned; a folder without its marker is what a crashed build left, which
the next caller deletes and builds again, never reads. The root is new each session, so nothing is reused from
an earlier run.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from filelock import FileLock


def session_root(tmp_path_factory) -> Path:
    """A folder every worker of this pytest session sees and no other session does.

    Under xdist each worker's base temp folder sits inside the session's own (pytest-N/popen-gwK); without xdist
    the base temp folder is the session's own.
    """
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "session-shared"
    root.mkdir(exist_ok=True)
    return root


def built_once(folder: Path, build: Callable[[Path], object]) -> Path:
    """FOLDER, filled by BUILD(FOLDER, empty) the first time it is asked for in this session."""
    complete = folder.with_name(f"{folder.name}.complete")
    with FileLock(f"{folder}.lock"):
        if not complete.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a crashed build left: never read
            folder.mkdir()
            build(folder)
            complete.touch()
    return folder
