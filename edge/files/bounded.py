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
from pathlib import Path
from typing import Any, BinaryIO, Type, Union

MiB = 1 << 20
MAX_MODEL_BYTES = 512 * MiB  # a .tflite (Coral's models are 1-40 MB; the board has 1 GB)
MAX_DOCUMENT_BYTES = 64 * MiB  # a JSON document: manifest, sidecar, bundle, predictions, latency, journal
MAX_LABELS_BYTES = 4 * MiB  # labels.txt (ImageNet-21k's names are ~300 KB)
MAX_IMAGE_BYTES = 64 * MiB  # one encoded image
MAX_IMAGE_PIXELS = 40_000_000  # width x height before decoding (8K video is 33 MP; 40 MP decodes to 120 MB RGB)
MAX_JSON_DEPTH = 64  # edgeflow's own documents nest at most 5 deep


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


def loads_json(data: Union[str, bytes], where: str, error: Type[Exception], expected: str = "JSON") -> Any:
    """JSON from text or UTF-8 bytes, nested at most MAX_JSON_DEPTH deep; `error` naming `where` otherwise."""
    try:
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
