"""Reading files that came from elsewhere with limits that fit a 1 GB board, checked before the bytes are read.

    data = read_regular(path, MAX_DOCUMENT_BYTES, "bundle", InputError)   # bytes, or `error` naming the file
    with open_regular(path, MAX_IMAGE_BYTES, "image", InputError) as f: ...
    obj = loads_json(data, "bundle /b/bundle.json", InputError)            # depth-capped JSON

A FIFO or a device is refused before a read can block on it (it is opened without blocking and checked with
fstat); a file larger than its cap is refused from its size, and the read itself stops at the cap (a file can
grow between the check and the read). The caps are listed in docs/trust.md.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO, Type, Union

MiB = 1 << 20
MAX_MODEL_BYTES = 512 * MiB  # a .tflite (Coral's models are 1-40 MB; the board has 1 GB)
MAX_DOCUMENT_BYTES = 64 * MiB  # a JSON document: manifest, sidecar, bundle, predictions, latency, journal
MAX_LABELS_BYTES = 4 * MiB  # labels.txt (ImageNet-21k's names are ~300 KB)
MAX_IMAGE_BYTES = 64 * MiB  # one encoded image
MAX_IMAGE_PIXELS = 40_000_000  # width x height before decoding (8K video is 33 MP; 40 MP decodes to 120 MB RGB)
MAX_JSON_DEPTH = 64  # edgeflow's own documents nest at most 5 deep
# json's C parser recurses once per level under the interpreter's recursion limit, and is safe from overflowing the
# C stack only under a limit near CPython's default (1000). A library may raise it for the whole process (onnx2tf
# sets 2**31 - 1 when imported): a file nested 100,000 deep then ends the process with a segmentation fault.
SAFE_RECURSION = 1000


def open_regular(path: Union[str, Path], cap: int, what: str, error: Type[Exception]) -> BinaryIO:
    """`path` opened for reading when it is a regular file of at most `cap` bytes; `error` naming it otherwise
    (an OSError from opening it, such as FileNotFoundError, is left to the caller to word)."""
    path = Path(path)
    fd = os.open(str(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # OSError (not found ...): the caller's words
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a directory" if stat.S_ISDIR(info.st_mode) else "a device or socket"
            raise error(f"{what} {path} is {kind}, not a regular file; expected a file")
        if info.st_size > cap:
            raise error(f"{what} {path} is {info.st_size} bytes, more than the {cap} this edgeflow reads "
                        f"(docs/trust.md); expected a smaller file")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Union[str, Path], cap: int, what: str, error: Type[Exception]) -> bytes:
    """The bytes of a regular file of at most `cap` bytes (read once, never more than `cap` + 1)."""
    with open_regular(path, cap, what, error) as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise error(f"{what} {path} grew past {cap} bytes while it was read; expected a file that is not being written")
    return data


class _recursion_at_most:
    """The recursion limit lowered to `limit` (above what this thread's stack already holds) while the block runs."""

    def __init__(self, limit: int):
        self.limit = limit

    def __enter__(self):
        self.before = sys.getrecursionlimit()
        frame, depth = sys._getframe(), 0
        while frame is not None:
            frame, depth = frame.f_back, depth + 1
        if self.before > self.limit + depth:
            sys.setrecursionlimit(self.limit + depth)

    def __exit__(self, *exc):
        sys.setrecursionlimit(self.before)


def loads_json(data: Union[str, bytes], where: str, error: Type[Exception], expected: str = "JSON") -> Any:
    """JSON from text or UTF-8 bytes, nested at most MAX_JSON_DEPTH deep; `error` naming `where` otherwise."""
    try:
        with _recursion_at_most(SAFE_RECURSION):
            obj = json.loads(data)
    except RecursionError:
        raise error(f"{where} is nested deeper than {MAX_JSON_DEPTH} levels; expected {expected}") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise error(f"cannot read {where}: not valid JSON ({err}); expected {expected}") from None
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise error(f"{where} is nested deeper than {MAX_JSON_DEPTH} levels; expected {expected}")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return obj
