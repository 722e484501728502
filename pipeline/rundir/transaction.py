"""What one stage writes to a run, put in place with the manifest in one step (`Run.transaction`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from edge.files.confined import OutsideFolder, no_symlink_below
from edge.model.integrity import sha256_bytes, sidecar_path
from pipeline.errors import ManifestError
from pipeline.rundir import journal, manifest as manifest_io
from pipeline.rundir.artifacts import artifact
from pipeline.rundir.files import sha256_of, signals_held


def before_commit(run_dir: Path) -> None:
    """Called as a transaction's commit begins, before anything of it is hashed or written and before signals are
    held; does nothing. The seam a test replaces to hold a stage there (tests/faults/test_faults.py's "middle" signal), as
    `journal.step` is the one for the steps inside the commit."""


class Transaction:
    """What one stage writes: artifacts, files that go with them, records to forget, manifest facts."""

    def __init__(self, run):  # the Run it writes to (run.py imports this module, so not the other way)
        self.run = run
        self._contents: Dict[Path, Union[bytes, Path]] = {}
        self._records: Dict[str, Tuple[Path, Dict[str, Any]]] = {}  # key -> (final path, facts)
        self._forget: List[str] = []
        self._facts: Dict[str, Any] = {}
        self._remove: List[Path] = []

    def write(self, key: str, data: Union[bytes, Path], name: Optional[str] = None, **facts: Any) -> Path:
        """Artifact `key` from bytes, or from a file or folder prepared inside RUN (moved in); recorded with its
        sha256 and `facts`. `name` only for artifacts the table cannot name (compiled segments)."""
        final = self.run.dir / (name or artifact(key).name)
        self._contents[final] = data
        self._records[key] = (final, facts)
        return final

    def write_file(self, path: Path, data: Union[bytes, Path]) -> Path:
        """A file that goes with the artifacts (a sidecar, a readable report), not recorded itself."""
        self._contents[Path(path)] = data
        return Path(path)

    def forget(self, key: str) -> None:
        """Drop `key`'s record; its file and sidecar go when the transaction commits."""
        self._forget.append(key)

    def set(self, field: str, value: Any) -> None:
        """A top-level manifest fact (e.g. `parity`: the gate's verdict)."""
        self._facts[field] = value

    def remove(self, path: Path) -> None:
        """A path inside RUN (file or folder) that goes when the transaction commits, and stays if it does not
        (train's checkpoints: a run that was not written must still resume)."""
        self._remove.append(Path(path))

    def commit(self) -> None:
        before_commit(self.run.dir)
        artifacts = self.run.manifest.get("artifacts", {})
        removing = []
        for key in self._forget:
            if key in artifacts and key not in self._records:
                path = self.run.dir / artifacts[key]["path"]
                removing += [path, sidecar_path(path)]
        removing += self._remove
        manifest = dict(self.run.manifest, artifacts=dict(artifacts))
        # Hashed from what is about to go in (bytes, or the prepared file or folder), before the signals wait.
        digests = {key: _sha256(self._contents[path]) for key, (path, _) in self._records.items()}
        for key in self._forget:
            manifest["artifacts"].pop(key, None)
        for path in list(self._contents) + removing:  # before anything is hashed or written: no path leaves RUN
            _check_inside(self.run.dir, path)
        for key, (path, facts) in self._records.items():
            rel = Path(os.path.relpath(path.absolute(), self.run.dir.absolute())).as_posix()
            manifest["artifacts"][key] = {"path": rel, "sha256": digests[key], **facts}
        manifest.update(self._facts)
        with signals_held():  # Ctrl-C and SIGTERM wait for the renames, the commit and the clean-up (or roll-back)
            journal.apply(self.run.dir, self._contents, removing, manifest_io.encode(manifest))
        self.run.manifest = manifest


def _check_inside(run_dir: Path, path: Path) -> None:
    try:
        no_symlink_below(run_dir, path, "path")
    except OutsideFolder as err:
        raise ManifestError(f"{err}: a stage writes only inside its run, and nothing was written") from None


def _sha256(data: Union[bytes, Path]) -> str:
    return sha256_bytes(data) if isinstance(data, bytes) else sha256_of(data)
