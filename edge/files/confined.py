"""Paths that a file from elsewhere names (a run's journal or manifest, a bundle's entries), kept inside their folder.

    path = inside(root, "parity/report.json")        # root / rel, or OutsideFolder saying why not

A name that passes as text (relative, no `..`) can still leave its folder through a symlink inside it, so every
component below `root` is checked with lstat: none may be a symlink. Components that do not exist yet are fine
(a transaction makes them); `root` itself is the user's own choice and may be a symlink.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Union


class OutsideFolder(ValueError):
    """A named path that is absolute, climbs out with `..`, or goes through a symlink inside its folder."""


def inside(root: Union[str, Path], rel: object, what: str = "path") -> Path:
    """`root / rel` when `rel` is a relative path with no `..` and no symlinked component below `root`."""
    root = Path(root)
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        raise OutsideFolder(f"{what} {rel!r} is not a path; expected a relative path inside {root}")
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or os.path.isabs(rel) or ".." in parts or not parts:
        raise OutsideFolder(f"{what} {rel!r} is outside {root}; expected a relative path inside it, without '..'")
    current = root
    for part in parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break  # what is below does not exist either
        except NotADirectoryError:
            raise OutsideFolder(f"{what} {rel!r} goes through a file in {root}; expected a path inside it") from None
        if stat.S_ISLNK(mode):
            raise OutsideFolder(f"{what} {rel!r} goes through the symlink {current}; a path named inside {root} "
                                "must not leave it (remove the symlink or copy what it points to)")
    return root / PurePosixPath(rel)


def no_symlink_below(root: Union[str, Path], path: Union[str, Path], what: str = "path") -> Path:
    """`path` (absolute or relative to the working folder) when it lies under `root` with no symlinked component."""
    root, path = Path(root), Path(path)
    try:
        rel = os.path.relpath(path.absolute(), root.absolute())
    except ValueError:
        raise OutsideFolder(f"{what} {path} is outside {root}") from None
    inside(root, Path(rel).as_posix(), what)
    return path
