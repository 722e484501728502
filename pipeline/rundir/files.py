"""Atomic file writes and content hashes, so a failed stage never leaves half a file behind.

The writers are edge.atomic's (one implementation for both sides, with fsync); this module adds
what only the host needs: hashes of files and folders, and `staged_path` for whole directories.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from edge.atomic import fsync_dir, json_bytes, write_bytes_atomic, write_json_atomic, write_temp_sibling, write_text_atomic

__all__ = ["json_bytes", "replacing", "sha256_of", "staged_path", "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]


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


@contextmanager
def staged_path(final: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `final` to fill (file or directory); move it into place on success.

    A directory already at `final` is renamed aside first and deleted only once the new one is in
    place; if moving the new one in fails, the old one is renamed back. On any exception whatever
    was at `final` stays as it was.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    staging = tmp / final.name
    try:
        yield staging
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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the staging leftovers, or the old directory


@contextmanager
def replacing(contents: Dict[Path, bytes]) -> Iterator[None]:
    """Put several files in place together; the body records them (e.g. saves the manifest).

    Each new file is written to a temporary sibling first; each old one keeps a second name (a hard
    link, or a copy) until the body has finished. If anything fails, while writing, while renaming
    or in the body, every path is put back as it was: the old file, or no file.
    """
    staged: List[Tuple[Path, Path]] = []  # (final, temporary)
    done: List[Tuple[Path, Path]] = []  # (final, backup of the old file or None)
    try:
        for final, data in contents.items():
            staged.append((Path(final), write_temp_sibling(final, data)))
        for final, tmp in staged:
            backup = _keep_old(final)
            try:
                os.replace(tmp, final)
            except BaseException:
                if backup is not None:
                    backup.unlink()  # `final` is still the old file: the backup is only its second name
                raise
            done.append((final, backup))
            fsync_dir(final.parent)
        yield
    except BaseException:
        for final, backup in reversed(done):
            if backup is not None:
                os.replace(backup, final)
            else:
                final.unlink(missing_ok=True)
        for _, tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    for _, backup in done:
        if backup is not None:
            backup.unlink(missing_ok=True)


def _keep_old(final: Path):
    """A second name for the file at `final` (None when there is none), so it can be put back."""
    if not final.exists():
        return None
    backup = final.with_name(f".{final.name}.{secrets.token_hex(6)}.old")
    try:
        os.link(final, backup)  # same bytes, no copy; the rename of the new file leaves this name intact
    except OSError:
        shutil.copy2(final, backup)  # file systems without hard links
    return backup
