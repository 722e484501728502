"""Atomic file writes and content hashes, so a failed stage never leaves half a file behind.

The writers and `signals_held` are edge.files.atomic's (one implementation for both sides); this module adds
what only the host needs: hashes of files and folders, and `scratch_folder` and `staged_path` for whole
directories. Several paths at once, with the manifest, go through a run's transaction (journal.py).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from edge.files.atomic import (
    fsync_dir,
    json_bytes,
    signals_held,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)

__all__ = ["json_bytes", "scratch_folder", "sha256_of", "signals_held", "staged_path", "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]


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


def fsync_tree(path: Path) -> None:
    """Make a prepared file, or every file and folder of a prepared tree, durable before it is renamed in: a
    rename made durable over data still in the page cache leaves, after a power cut, a name with no content."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        for root, _, names in os.walk(path):
            for name in names:
                _fsync_file(Path(root) / name)
            fsync_dir(root)
    elif not path.is_symlink():
        _fsync_file(path)


def _fsync_file(path: Path) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def staged_path(final: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `final` to fill (file or directory); move it into place on success.

    A directory already at `final` is renamed aside first and deleted only once the new one is in
    place; if moving the new one in fails, the old one is renamed back. On any exception whatever
    was at `final` stays as it was.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    with scratch_folder(final.parent, prefix=f".{final.name}.", suffix=".tmp") as tmp:  # also holds the old one
        staging = tmp / final.name
        yield staging
        fsync_tree(staging)
        aside = None
        if final.is_dir() and not final.is_symlink():
            # os.replace cannot overwrite a non-empty directory; a file it replaces atomically.
            aside = tmp / f"{final.name}.old"
            os.replace(final, aside)
        try:
            os.replace(staging, final)
        except BaseException:
            if aside is not None:
                os.replace(aside, final)
            raise
        fsync_dir(final.parent)


@contextmanager
def scratch_folder(parent: Path, prefix: str, suffix: str = ".tmp") -> Iterator[Path]:
    """A new empty folder in `parent` (the same file system, so what is built there moves in by rename), removed
    with whatever is still in it when the block ends, however it ends: an error or a signal included. Its name
    (`PREFIX<random>.tmp`, hidden when PREFIX starts with a dot) marks it as a leftover for a run's recovery
    when a SIGKILL or a power cut gives the block no end."""
    made = None
    try:
        with signals_held():  # made and named as one step: the finally below always knows what to remove
            made = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
        yield made
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
