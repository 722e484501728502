"""What every task's `pipeline prepare` hands back, and where its shards go (a local folder or gs://)."""
from __future__ import annotations

import posixpath
from pathlib import Path
from typing import List, NamedTuple


class PrepareResult(NamedTuple):
    shards: List[str]  # paths (local or gs://) of the shards written
    labels_path: str
    count: int  # records written, checked by reading them back
    reencoded: int  # images that were not JPEG and were re-encoded
    pattern: str = ""  # the --data glob that trains on the shards


def join_path(out: str, name: str) -> str:
    return posixpath.join(out, name) if out.startswith("gs://") else str(Path(out) / name)
