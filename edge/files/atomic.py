"""The one atomic file writer of the project: a temporary sibling, fsync, rename, fsync of the folder.

    from edge.files.atomic import write_bytes_atomic, write_json_atomic
    write_json_atomic(Path("predictions.json"), {"top1": 0.93})

A reader sees the old file or the new one, never half of one, and after a power cut the rename is
on disk too (the folder's fsync). Ctrl-C and SIGTERM wait while a temporary file exists (`signals_held`),
so a signal never leaves one behind. Used by the device side and, through pipeline.rundir.files, by every stage.
"""
from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Union

PathLike = Union[str, Path]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_dir(folder: PathLike) -> None:
    """Make a rename inside `folder` durable (no-op where folders cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(str(folder), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the rename itself is still atomic
    finally:
        os.close(fd)


def write_temp_sibling(path: PathLike, data: bytes) -> Path:
    """Write `data` to a new, fsynced temporary file beside `path` (same folder, so a rename is atomic)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; artifacts are for sharing
    _fill(fd, Path(tmp), data, path)
    return Path(tmp)


def write_new_file(path: PathLike, data: bytes, for_path: PathLike) -> Path:
    """Create `path`, which must not exist (a name chosen and recorded beforehand), with `data`, fsynced.
    `for_path` is the file it will become, named in a full disk's error."""
    path = Path(path)
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    _fill(fd, path, data, Path(for_path))
    return path


def _fill(fd: int, tmp: Path, data: bytes, path: Path) -> None:
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if err.filename is None:  # a full disk fails in write() or fsync(), which name no file: name it
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the body is done, then take effect as usual: a temporary file and its
    rename, or a rename sequence and its roll-back, are not cut in half. Python runs signal handlers in the
    main thread only, so swapping the handlers there holds them whichever thread the OS delivered the signal to.
    A signal the process was started to ignore (`nohup`, a background job) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: List[int] = []
    # Held, an ignored SIGINT would be received first and sent again to nothing, and a SIGTERM after it lost.
    held = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if received:
            os.kill(os.getpid(), received[0])  # delivered now, to the handler it was meant for


def write_bytes_atomic(path: PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically and durably; returns the path. Nothing is left behind on failure,
    nor on a signal: one landing between the temporary file's creation and its rename would leave it."""
    path = Path(path)
    with signals_held():
        tmp = write_temp_sibling(path, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(path.parent)
    return path


def write_text_atomic(path: PathLike, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def json_bytes(obj: Any, indent: int = 2) -> bytes:
    """The bytes every JSON file of the project is written as (indented, UTF-8, final newline)."""
    return (json.dumps(obj, indent=indent) + "\n").encode("utf-8")


def write_json_atomic(path: PathLike, obj: Any, indent: int = 2) -> Path:
    return write_bytes_atomic(path, json_bytes(obj, indent))
