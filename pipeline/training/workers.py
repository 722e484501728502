"""Where each worker of a training run writes: every worker runs the same code, and this decides.

The chief writes RUN and holds its writer lock; a non-chief worker (MultiWorkerMirroredStrategy) takes
part in every collective, saves included, but writes into a temporary folder it removes, and leaves
behind in RUN (which may be the chief's, on shared storage) only what it found there.

    workers = Workers(chosen, run_dir, created=not run_dir.exists())
    with workers.lock("pipeline train"), workers.peer_failures_explained():
        ...
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Sequence

from pipeline.rundir import lock as run_lock
from pipeline.rundir.files import write_json_atomic
from pipeline.training import strategy as strategy_mod


@dataclass(frozen=True)
class Workers:
    chosen: strategy_mod.StrategyChoice
    run_dir: Path
    created: bool  # this process made RUN: a run that leaves nothing removes it again

    @property
    def is_chief(self) -> bool:
        return self.chosen.is_chief

    def lock(self, command: str) -> ContextManager:
        """The chief holds RUN's writer lock; the other workers share the chief's folder without it."""
        return run_lock.hold(self.run_dir, command) if self.is_chief else contextlib.nullcontext()

    def peer_failures_explained(self) -> ContextManager[None]:
        """A lost peer's gRPC failure as PeerLost saying how to resume (multi-worker runs only)."""
        return strategy_mod.peer_failures_explained(self.chosen, self.run_dir)

    def make_folder(self, path: Path) -> None:
        if self.is_chief:
            path.mkdir(parents=True, exist_ok=True)

    def write_json(self, path: Path, value) -> None:
        if self.is_chief:
            write_json_atomic(path, value)

    @contextlib.contextmanager
    def kept_on_failure(self, state_dir: Path, logs_dir: Path, progress: Path,
                        empty_folders: Sequence[str]) -> Iterator[None]:
        """On any failure, take away what a run that never got far enough leaves: the chief keeps
        `state_dir` once `progress` exists (a run to resume) and otherwise removes it, the logs it
        started and, when it made RUN, all of RUN but the lock files; a non-chief removes only the
        `empty_folders` of `state_dir`, `state_dir` and RUN where it left them empty."""
        logs_created = not logs_dir.exists()
        try:
            yield
        except BaseException:
            if not self.is_chief:
                self._remove_leftovers(state_dir, empty_folders)
            elif not progress.exists():
                shutil.rmtree(state_dir, ignore_errors=True)
                if logs_created:
                    shutil.rmtree(logs_dir, ignore_errors=True)
                if self.created:  # all but the lock file, which is never removed (pipeline/rundir/lock.py)
                    for path in self.run_dir.iterdir():
                        if path.name not in (run_lock.LOCK_NAME, run_lock.HOLDER_NAME):
                            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            raise

    def finish_elsewhere(self, save: Callable[[Path], None], state_dir: Path, empty_folders: Sequence[str]) -> None:
        """A non-chief's end: `save` into a temporary folder (its saves are collectives the chief waits on),
        which is then removed with what the worker left empty in RUN; only the chief's copy is kept."""
        with tempfile.TemporaryDirectory() as scratch, self.peer_failures_explained():
            save(Path(scratch))
        self._remove_leftovers(state_dir, empty_folders)
        print("this worker is done; the chief writes the run directory", flush=True)

    def _remove_leftovers(self, state_dir: Path, empty_folders: Sequence[str]) -> None:
        # RUN may be the chief's (shared storage): only what is empty goes. BackupAndRestore leaves its
        # empty folder behind.
        for path in [state_dir / name for name in empty_folders] + [state_dir] + ([self.run_dir] if self.created else []):
            try:
                path.rmdir()
            except OSError:
                pass
