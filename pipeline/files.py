"""Atomic file writes and content hashes, so a failed stage never leaves half a file behind."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def sha256_of(path: Path) -> str:
    """sha256 of a file, or of a directory as the hash of its sorted (relative path, file hash) list."""
    path = Path(path)
    if path.is_dir():
        digest = hashlib.sha256()
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(child.relative_to(path).as_posix().encode())
            digest.update(sha256_of(child).encode())
        return digest.hexdigest()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write to a temporary file beside `path`, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; artifacts are for sharing
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def staged_path(final: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `final` to fill (file or directory); rename it into place on success.

    On an exception the temporary is removed and whatever was at `final` stays untouched.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    staging = tmp / final.name
    try:
        yield staging
        if final.is_dir():
            shutil.rmtree(final)
        os.replace(staging, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
