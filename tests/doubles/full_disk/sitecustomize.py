"""A TEST DOUBLE of a disk that fills, for machines where the tests cannot mount a small tmpfs (not root).

Put this folder on PYTHONPATH. Every temporary file the project's one atomic writer (edge.atomic) makes
then spends its size, in whole 4 KiB pages as tmpfs counts them, from EDGEFLOW_TEST_DISK_FREE bytes; the
write that does not fit fails with ENOSPC, as writing on a full disk does at that point. Without that
variable nothing fails. EDGEFLOW_TEST_DISK_LOG names a file that gets one line per write ("path size"),
so a test can measure, on a run of the same command, how much room to leave for the failure to land
where it wants. It counts what is written, never what is freed: enough for one command that fails. It
is not a disk and proves nothing about the file system; the real test mounts a tmpfs and fills it.
"""
import errno
import os

import edge.atomic as _atomic

PAGE = 4096
_real = _atomic.write_temp_sibling
_free = [int(os.environ["EDGEFLOW_TEST_DISK_FREE"])] if os.environ.get("EDGEFLOW_TEST_DISK_FREE") else None


def _filling(path, data):
    spent = -(-len(data) // PAGE) * PAGE
    if os.environ.get("EDGEFLOW_TEST_DISK_LOG"):
        with open(os.environ["EDGEFLOW_TEST_DISK_LOG"], "a") as log:
            log.write(f"{path} {len(data)}\n")
    if _free is not None:
        if spent > _free[0]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        _free[0] -= spent
    return _real(path, data)


_atomic.write_temp_sibling = _filling
