"""A TEST DOUBLE of a full disk, for machines where the tests cannot mount a small tmpfs (not root).

Put this folder on PYTHONPATH: every temporary file the project's one atomic writer (edge.atomic)
makes then fails with ENOSPC, as writing on a full disk does at that point. It is not a disk and
proves nothing about the file system; the real test mounts a tmpfs and fills it.
"""
import errno
import os

import edge.atomic as _atomic


def _no_space(path, data):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


_atomic.write_temp_sibling = _no_space
