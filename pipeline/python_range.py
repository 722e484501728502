"""The Pythons the host side (`pipeline`) runs on, checked before anything of it is imported.

    refuse_unsupported()   # exits 2 with one line on a Python outside HOST_PYTHONS

The package installs on 3.9 for the device side (`edge`, Coral's boards), so a `pipeline` command can exist on a
Python its TensorFlow has no wheel for; it then says so instead of failing on an import.
"""
from __future__ import annotations

import sys
from typing import Sequence, Tuple

HOST_PYTHONS = ((3, 10), (3, 13))  # tensorflow 2.21.0's wheels: cp310 to cp313 (pyproject.toml's `host` extra)


def unsupported(version: Sequence[int] = sys.version_info[:3]) -> str:
    """The one-line refusal for VERSION (major, minor, micro), or "" when the host side runs on it."""
    (low, high), here = HOST_PYTHONS, tuple(version[:2])
    if low <= here <= high:
        return ""
    shown = ".".join(map(str, version[:3]))
    return (f"error: pipeline (the host side) needs Python {low[0]}.{low[1]} to {high[0]}.{high[1]}, and this is Python "
            f"{shown} ({sys.executable}); make the venv with a supported one, e.g. `python3.13 -m venv .venv` "
            f"(docs/install.md); on a board, `edge` runs on Python 3.9 to 3.13")


def refuse_unsupported() -> None:
    message = unsupported()
    if message:
        print(message, file=sys.stderr)
        sys.exit(2)
