"""A full disk while TensorFlow writes (a checkpoint, a SavedModel) as one line naming the folder, not a 47-line
ResourceExhaustedError traceback or an ENOSPC without its path.

    with disk_full_named(state_dir, "the epoch's checkpoint"):
        model.fit(...)
"""
from __future__ import annotations

import errno
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipeline.errors import PipelineError


class DiskFull(PipelineError):
    """The disk filled while a stage wrote; what it was writing was not kept."""


def _is_disk_full(err: BaseException) -> bool:
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    # TensorFlow's file writers raise ResourceExhaustedError (or another OpError) whose text carries the errno's words.
    return type(err).__name__ in ("ResourceExhaustedError", "UnknownError", "InternalError") and (
        "No space left on device" in str(err) or "Disk quota exceeded" in str(err))


@contextmanager
def disk_full_named(folder: Path, what: str) -> Iterator[None]:
    """Turn a full disk inside the block into DiskFull naming `folder` and `what` was being written."""
    try:
        yield
    except Exception as err:  # noqa: BLE001 - only a full disk is translated; everything else goes on as it was
        if not _is_disk_full(err):
            raise
        where = getattr(err, "filename", None) or folder
        raise DiskFull(f"{where}: No space left on device (ENOSPC) while writing {what}; free space on that disk and run "
                       "the same command again (training resumes from its last completed epoch)") from None
