"""The run directory as an object: what stages read of it, and the one way a stage writes to it.

    run = Run.open(run_dir)
    saved_model = run.artifact("saved_model")          # its sha256 checked against the manifest
    with run.transaction() as t:                        # files and manifest together, or none of them
        t.write("model_int8", model_bytes, mode="int8")
        t.write_file(sidecar_path, sidecar_bytes)       # a file that goes with it, not an artifact itself

`ARTIFACTS` (artifacts.py) is the one table of file key -> name inside RUN -> the command that writes it; the typed
views of the manifest's sections are in views.py, the write side (`Transaction`) in transaction.py.
Every stage saves the manifest once, in its transaction, whose rollback journal (journal.py) makes a
SIGKILL or power cut at any instant leave the old run or the new one. A stage that writes holds the
run's lock (`writing`, pipeline/rundir/lock.py) for its whole life; readers take none, except briefly
to recover a transaction that a dead writer left unfinished (`Run.open`).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from edge.files.confined import OutsideFolder, inside
from edge.pixels.contract import PixelContract
from edge.errors import InputError
from pipeline.errors import ManifestError, RunBusy
from pipeline.rundir import journal, lock, manifest as manifest_io
# The artifact table is read through this module by every stage: `from pipeline.rundir.run import artifact`.
from pipeline.rundir.artifacts import ARTIFACTS, artifact, is_compiled  # noqa: F401
from pipeline.rundir.files import sha256_of, signals_held
from pipeline.rundir.transaction import Transaction
from pipeline.rundir.views import DataView, ModelView, TrainingView, views

# How long a reader waits for a live writer to finish committing (renames and fsyncs: seconds at most).
SETTLE_SECONDS = 60.0


class Run:
    """A run directory and its manifest, as read when it was opened."""

    def __init__(self, run_dir: Path, manifest: Dict[str, Any]):
        self.dir = Path(run_dir)
        self.manifest = manifest  # read only here, in pipeline/rundir/: everything else reads the views below

    @classmethod
    def open(cls, run_dir: Path) -> "Run":
        """The run at `run_dir`, refusing a missing, unreadable, damaged or other-schema manifest. A transaction
        left unfinished is finished or rolled back first (`settle`), so what is read is a committed run."""
        settle(Path(run_dir))
        return cls(Path(run_dir), manifest_io.load(Path(run_dir)))

    @classmethod
    def new(cls, run_dir: Path, **record: Any) -> "Run":
        """A run whose manifest does not exist yet (train): its first transaction writes it."""
        return cls(Path(run_dir), manifest_io.new(**record))

    def path(self, key: str) -> Path:
        """Where the file `key` of ARTIFACTS goes in this run, recorded or not (`report`, `manifest`)."""
        return self.dir / artifact(key).name

    # What stages read -------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return str(self.dir / manifest_io.MANIFEST_NAME)

    @property
    def data(self) -> DataView:
        return views(self.manifest, self._where)[0]

    @property
    def training(self) -> TrainingView:
        return views(self.manifest, self._where)[1]

    @property
    def model(self) -> ModelView:
        return views(self.manifest, self._where)[2]

    @property
    def image_size(self) -> int:
        return self.model.image_size

    @property
    def labels(self) -> List[str]:
        return list(self.fact("labels"))

    @property
    def contract(self) -> PixelContract:
        """The run's pixel contract (edge.pixels.contract): how images become the SavedModel's input, on every side."""
        recorded = self.manifest.get("preprocessing")
        if not isinstance(recorded, dict):
            raise ManifestError("the run records no pixel contract (it was trained by an earlier edgeflow); train it again")
        return _contract(recorded, f"{self._where} (preprocessing)")

    def contract_of(self, key: str) -> PixelContract:
        """The pixel contract model `key` takes: its own record (an int8 export takes Coral's mean 128, std 128),
        else the run's (models exported before each model recorded its own)."""
        recorded = self.entry(key).get("preprocessing")
        return _contract(recorded, f"{self._where} ({key})") if recorded else self.contract

    @property
    def global_batch(self) -> int:
        """The global batch `pipeline train` used (QAT fine-tunes at it)."""
        return self.training.global_batch

    @property
    def trained_at(self) -> Optional[str]:
        """When `pipeline train` finished (None for a run that does not say)."""
        stages = self.manifest.get("stages")
        train = stages.get("train") if isinstance(stages, dict) else None
        return train.get("finished") if isinstance(train, dict) else None

    @property
    def updated(self) -> Optional[str]:
        return self.manifest.get("updated")

    @property
    def versions(self) -> Optional[Dict[str, Any]]:
        """The library versions train ran with."""
        return self.manifest.get("versions")

    @property
    def task(self) -> str:
        """The task the run was trained for (pipeline/tasks); runs from before tasks existed are classifiers."""
        from pipeline import tasks

        return self.manifest.get("task") or tasks.DEFAULT

    @property
    def detection(self) -> Dict[str, Any]:
        """A detection run's anchor spec and post-processing record, what export and parity rebuild the detector's
        decoding from; ManifestError naming it when the run has none."""
        return self.fact("detection")

    @property
    def metrics(self) -> Dict[str, Any]:
        """Train's held-out scores and the task's other entries (per class, the evaluator); {} when not recorded."""
        metrics = self.manifest.get("metrics")
        return metrics if isinstance(metrics, dict) else {}

    @property
    def heldout_metrics(self) -> Dict[str, Any]:
        """Train's evaluation on the held-out split (loss, accuracy, macro-F1); {} when not recorded."""
        metrics = self.manifest.get("metrics")
        heldout = metrics.get("heldout") if isinstance(metrics, dict) else None
        return heldout if isinstance(heldout, dict) else {}

    @property
    def parity(self) -> Dict[str, Any]:
        """The last parity's verdict per model (`pipeline parity` sets it); {} before parity ran."""
        return self.manifest.get("parity") or {}

    @property
    def origin(self) -> Optional[Dict[str, Any]]:
        """Where an imported model came from (`pipeline import`: format, path, sha256, its copy, input contract);
        None for a run `pipeline train` made."""
        return self.manifest.get("origin")

    @property
    def remedy(self) -> Optional[Dict[str, Any]]:
        """What `export --int8 --remedy` tried, attempt by attempt; None when it did not run."""
        return self.manifest.get("remedy")

    def recorded(self) -> List[str]:
        """The keys of every artifact the manifest records, in its order."""
        return list(self.manifest.get("artifacts", {}))

    def has(self, key: str) -> bool:
        return key in self.manifest.get("artifacts", {})

    def entry(self, key: str) -> Dict[str, Any]:
        """The manifest's record of `key` (path, sha256, facts); 'run X first' when there is none."""
        entry = self.manifest.get("artifacts", {}).get(key)
        if entry is None:
            raise ManifestError(f"{self.dir} has no {key!r} recorded in its manifest; run `{artifact(key).producer}` first")
        return entry

    def artifact(self, key: str, verify: bool = True) -> Path:
        """The recorded path of `key`, after checking it exists and (by default) its sha256."""
        entry = self.entry(key)
        try:
            path = inside(self.dir, entry["path"], f"{key!r} is recorded as")
        except OutsideFolder as err:
            raise ManifestError(f"{self._where}: {err}") from None
        if not path.exists():
            raise ManifestError(f"{key!r} is recorded as {entry['path']} but {path} does not exist")
        if verify:
            actual = sha256_of(path)
            if actual != entry["sha256"]:
                raise ManifestError(
                    f"{path} changed after it was recorded: sha256 {actual[:12]}…, manifest says {entry['sha256'][:12]}…; "
                    f"re-run `{artifact(key).producer}` or restore the file")
        return path

    def check_compiled_is_current(self, key: str) -> None:
        """Refuse a compiled model whose int8 source has been re-exported since it was compiled."""
        entry = self.entry(key)
        source = self.manifest.get("artifacts", {}).get("model_int8", {}).get("sha256")
        if "compiled_from" in entry and entry["compiled_from"] != source:
            raise ManifestError(
                f"{entry['path']} was compiled from an earlier int8 model (sha256 {entry['compiled_from'][:12]}…, "
                f"the run's is now {str(source)[:12]}…); run `pipeline compile RUN` again")

    def fact(self, *keys: str) -> Any:
        """The manifest's entry at `keys` (a task's own record: fact("pose", "head")); ManifestError naming it when missing."""
        value: Any = self.manifest
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                raise ManifestError(f"{self.dir / manifest_io.MANIFEST_NAME} records no {'.'.join(keys)}; "
                                    "expected the manifest written by `pipeline train`")
            value = value[key]
        return value

    # The one way to write ---------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator["Transaction"]:
        """Collect a stage's files and facts; on leaving the block, put every file in place and save the
        manifest once. An exception anywhere (in the block, a full disk, a signal) leaves RUN as it was."""
        t = Transaction(self)
        yield t
        t.commit()


def _contract(recorded: Any, where: str) -> PixelContract:
    try:
        return PixelContract.from_record(recorded, where)
    except InputError as err:  # a run this edgeflow cannot feed is a damaged or newer manifest, not bad input
        raise ManifestError(str(err)) from None


@contextmanager
def writing(run_dir: Path, stage: str) -> Iterator[Run]:
    """Hold RUN's writer lock for the stage's whole life and open the run once the lock is held (taking the lock
    finishes or rolls back a transaction a dead writer left, and removes its leftovers)."""
    Run.open(run_dir)  # a folder that is not a run is refused before anything is put in it
    with lock.hold(run_dir, stage):
        yield Run.open(run_dir)


def settle(run_dir: Path) -> None:
    """Make sure no unfinished transaction is on RUN before it is read.

    A reader takes no lock, so it may meet a journal (journal.py). Two cases, told apart by the lock, which the
    kernel releases when its holder dies:
    - no process holds the lock: the writer died half way. The reader takes the lock for the moment it takes to
      finish or roll the transaction back (lock.hold recovers on taking it), exactly as the next writer would, and
      reads the result. Reading the manifest as it is instead would pair the old manifest with new files.
    - a live writer holds it: it is committing right now (a journal exists only from just before its renames to
      just after its commit, with Ctrl-C held). The reader waits for the journal to go, up to SETTLE_SECONDS,
      retrying the lock in case the writer dies meanwhile, then reads the committed run.
    A reader that may not write to RUN cannot recover; it is refused, naming the way out, rather than shown a run
    whose manifest and files disagree.
    """
    deadline = time.monotonic() + SETTLE_SECONDS
    while journal.pending(run_dir):
        if lock.held_here(run_dir):
            with signals_held():
                journal.recover(run_dir)
            return
        try:
            with lock.hold(run_dir, "recovering an unfinished transaction"):
                return
        except RunBusy:
            if time.monotonic() > deadline:
                raise RunBusy(f"{run_dir} has a transaction that another process has not finished committing in "
                              f"{SETTLE_SECONDS:.0f} s; try again when `pipeline` is done writing it") from None
            time.sleep(0.05)
        except OSError as err:  # a read-only mount or folder: the lock file cannot be opened for writing
            raise ManifestError(f"{run_dir} holds a transaction a stopped writer left unfinished, and finishing it "
                                f"needs write access ({err.strerror}); run any `pipeline` command on it as a user "
                                "who may write it") from None

