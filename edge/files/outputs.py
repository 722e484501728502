"""Where a command may write: never onto one of its inputs, never inside a run directory it does not own, and never
over an existing file unless it was told to (--overwrite). One check for every command's --out.

    check_output(Path(out), overwrite, "--out", inputs=[...])        # OutputRefused naming the path, or nothing
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional, Type

from edge.documents.schema import MANIFEST_NAME
from edge.errors import InputError


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def run_holding(path: Path) -> Optional[Path]:
    """The run directory (or bundle) `path` would land in: the nearest folder above it holding a manifest.json;
    None when there is none."""
    for folder in Path(path).absolute().parents:
        if (folder / MANIFEST_NAME).is_file():
            return folder
    return None


def check_output(path: Path, overwrite: bool, option: str = "--out", inputs: Iterable[Path] = (),
                 error: Type[Exception] = InputError) -> Path:
    """`path` when a command may write it; `error` naming the path and the way out otherwise."""
    path = Path(path)
    for source in inputs:
        if _same_file(path, Path(source)):
            raise error(f"{option} {path} is one of the inputs ({source}); expected a new file, so no input is overwritten")
    run = run_holding(path)
    if run is not None:
        raise error(f"{option} {path} is inside the run directory {run} (it holds {MANIFEST_NAME}); only pipeline's "
                    "stages write there: write it outside the run")
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise error(f"{option} {path} exists; pass --overwrite to replace it, or choose a new name")
    return path
