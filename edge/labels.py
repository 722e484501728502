"""Class names for a model: a labels file (one per line), else the sidecar's or manifest's, else class ids."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Union

from edge.errors import InputError


def read_labels(path: Union[str, Path]) -> List[str]:
    """Labels from a text file, one per line (line n is class n); trailing blank lines are ignored."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise InputError(f"cannot read labels file {path}: {err.strerror or err}; expected one label per line") from err
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise InputError(f"labels file {path} is empty, expected one label per line")
    return [line.strip() for line in lines]


def choose_labels(labels_file: Optional[Union[str, Path]], recorded: Optional[Sequence[str]]) -> Optional[List[str]]:
    """--labels FILE wins, then the labels recorded next to the model; None means "print class ids"."""
    if labels_file is not None:
        return read_labels(labels_file)
    if recorded:
        return [str(x) for x in recorded]
    return None
