"""Atomic file writes and content hashes, so a failed stage never leaves half a file behind.

The writers and `signals_held` are edge.atomic's (one implementation for both sides); this module adds
what only the host needs: hashes of files and folders, `scratch_folder` and `staged_path` for whole
directories, and `replacing` for several paths at once.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from edge.atomic import (fsync_dir, json_bytes, signals_held, write_bytes_atomic, write_json_atomic, write_temp_sibling,
                         write_text_atomic)

__all__ = ["json_bytes", "replacing", "scratch_folder", "sha256_of", "signals_held", "staged_path", "write_bytes_atomic", "write_json_atomic", "write_text_atomic"]


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
    with scratch_folder(final.parent, prefix=f".{final.name}.", suffix=".tmp") as tmp:  # also holds the old one
        staging = tmp / final.name
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


@contextmanager
def scratch_folder(parent: Path, prefix: str, suffix: str = "") -> Iterator[Path]:
    """A new empty folder in `parent` (the same file system, so what is built there moves in by rename), removed
    with whatever is still in it when the block ends, however it ends: an error or a signal included."""
    made = None
    try:
        with signals_held():  # made and named as one step: the finally below always knows what to remove
            made = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
        yield made
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


@contextmanager
def replacing(contents: Dict[Path, Union[bytes, Path]], removing: Sequence[Path] = ()) -> Iterator[None]:
    """Put several files and folders in place together, and take others away; the body records them
    (e.g. saves the manifest).

    A value in `contents` is the new file's bytes (written to a temporary sibling first) or a file or
    folder already prepared on the same file system (moved in by rename). Whatever stood at each path,
    and each path in `removing`, keeps a second name until the body has finished. If anything fails,
    while writing, while renaming or in the body, every path is put back as it was.
    """
    staged: List[Tuple[Path, Path]] = []  # (final, new content's temporary name)
    written: List[Path] = []  # the temporary siblings this function wrote (a prepared file is the caller's)
    done: List[Tuple[Path, Optional[Path]]] = []  # (final, the old content's second name or None)
    made = sorted({d for final in contents for d in Path(final).parents if not d.exists()}, key=lambda d: -len(d.parts))
    try:
        for final, data in contents.items():
            if not isinstance(data, Path):
                data = write_temp_sibling(final, data)
                written.append(data)
            staged.append((Path(final), data))
        for final, tmp in staged:
            backup = _keep_old(final)
            try:
                os.replace(tmp, final)
            except BaseException:
                _put_back(final, backup, moved_in=False)
                raise
            done.append((final, backup))
            fsync_dir(final.parent)
        for gone in map(Path, removing):
            if gone.exists() or gone.is_symlink():
                done.append((gone, _move_aside(gone)))
        yield
    except BaseException:
        for final, backup in reversed(done):
            _put_back(final, backup, moved_in=True)
        for tmp in written:
            tmp.unlink(missing_ok=True)  # gone already when it was moved in and put back
        for folder in made:  # folders made for the new files, deepest first
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    for _, backup in done:
        _remove(backup)


def _keep_old(final: Path) -> Optional[Path]:
    """A second name for what stands at `final` (None when nothing does), so it can be put back.
    A file keeps its place (a hard link is the second name); a folder is moved aside, since a rename
    cannot replace a folder that holds anything."""
    if not (final.exists() or final.is_symlink()):
        return None
    if final.is_dir() and not final.is_symlink():
        return _move_aside(final)
    backup = final.with_name(f".{final.name}.{secrets.token_hex(6)}.old")
    try:
        os.link(final, backup)  # same bytes, no copy; the rename of the new file leaves this name intact
    except OSError:
        shutil.copy2(final, backup)  # file systems without hard links
    return backup


def _move_aside(path: Path) -> Path:
    aside = path.with_name(f".{path.name}.{secrets.token_hex(6)}.old")
    os.replace(path, aside)
    return aside


def _put_back(final: Path, backup: Optional[Path], moved_in: bool) -> None:
    """Undo one path: the old content back at `final`, or nothing there when there was none."""
    if backup is not None and backup.is_dir() and not backup.is_symlink():
        if moved_in or final.exists():
            _remove(final)
        os.replace(backup, final)
    elif backup is not None:
        if moved_in:
            os.replace(backup, final)
        else:
            backup.unlink()  # `final` is still the old file: the backup is only its second name
    elif moved_in:
        _remove(final)


def _remove(path: Optional[Path]) -> None:
    if path is None:
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
