"""A TEST DOUBLE of a disk that fills, for machines where the tests cannot mount a small tmpfs (not root).

Put this folder on PYTHONPATH. Every file the project's one atomic writer (edge.files.atomic) creates, as a
temporary sibling (`write_temp_sibling`: the lock's note, the journal, the manifest) or under a name chosen
beforehand (`write_new_file`: a transaction's new files, under the names its journal records), then spends
its size, in whole 4 KiB pages as tmpfs counts them, from EDGEFLOW_TEST_DISK_FREE bytes; the write that does
not fit fails with ENOSPC naming the file it was for, as the writer names it on a full disk. Without that
variable nothing fails. EDGEFLOW_TEST_DISK_LOG names a file that gets one line per write ("path size", the
path being the file it is for, not its temporary name), so a test can measure, on a run of the same command,
how much room to leave for the failure to land where it wants. It counts what is written, never what is
freed: enough for one command that fails. It is not a disk and proves nothing about the file system; the
real test mounts a tmpfs and fills it.
"""
import errno
import os

import edge.files.atomic as _atomic

PAGE = 4096
_real_sibling = _atomic.write_temp_sibling
_real_new = _atomic.write_new_file
_free = [int(os.environ["EDGEFLOW_TEST_DISK_FREE"])] if os.environ.get("EDGEFLOW_TEST_DISK_FREE") else None


def _spend(path, data):
    """Log the write and take its pages from the room left, or fail as a full disk does."""
    spent = -(-len(data) // PAGE) * PAGE
    if os.environ.get("EDGEFLOW_TEST_DISK_LOG"):
        with open(os.environ["EDGEFLOW_TEST_DISK_LOG"], "a") as log:
            log.write(f"{path} {len(data)}\n")
    if _free is not None:
        if spent > _free[0]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        _free[0] -= spent


def _filling_sibling(path, data):
    _spend(path, data)
    return _real_sibling(path, data)


def _filling_new(path, data, for_path):
    _spend(for_path, data)
    return _real_new(path, data, for_path)


# Patched before any of the project's modules import these names (sitecustomize runs at start-up).
_atomic.write_temp_sibling = _filling_sibling
_atomic.write_new_file = _filling_new
