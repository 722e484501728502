"""The run directory as an object: what stages read of it, and the one way a stage writes to it.

    run = Run.open(run_dir)
    saved_model = run.artifact("saved_model")          # its sha256 checked against the manifest
    with run.transaction() as t:                        # files and manifest together, or none of them
        t.write("model_int8", model_bytes, mode="int8")
        t.write_file(sidecar_path, sidecar_bytes)       # a file that goes with it, not an artifact itself

`ARTIFACTS` is the one table of artifact key -> file name inside RUN -> the command that produces it.
Every stage saves the manifest once, in its transaction, whose rollback journal (journal.py) makes a
SIGKILL or power cut at any instant leave the old run or the new one. A stage that writes holds the
run's lock (`writing`, pipeline/rundir/lock.py) for its whole life; readers take none, except briefly
to recover a transaction that a dead writer left unfinished (`Run.open`).
"""
from __future__ import annotations

import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from edge.integrity import sha256_bytes, sidecar_path
from pipeline.errors import ManifestError, RunBusy
from pipeline.rundir import journal, lock, manifest as manifest_io
from pipeline.rundir.files import sha256_of, signals_held

# How long a reader waits for a live writer to finish committing (renames and fsyncs: seconds at most).
SETTLE_SECONDS = 60.0


@dataclass(frozen=True)
class Artifact:
    name: str  # path inside RUN
    producer: str  # the command that writes it, for "run X first" messages


ARTIFACTS: Dict[str, Artifact] = {
    "saved_model": Artifact("saved_model", "pipeline train"),
    "keras_model": Artifact("keras_model.keras", "pipeline train"),
    "labels": Artifact("labels.txt", "pipeline train"),
    "history": Artifact("history.json", "pipeline train"),
    "heldout_detections": Artifact("heldout_detections.json", "pipeline train --task detect"),
    "model_float": Artifact("model_float.tflite", "pipeline export RUN"),
    "model_int8": Artifact("model_int8.tflite", "pipeline export RUN --int8"),
    "model_float16": Artifact("model_float16.tflite", "pipeline export RUN --float16"),
    "model_dynamic_range": Artifact("model_dynamic_range.tflite", "pipeline export RUN --dynamic-range"),
    "quantization_report": Artifact("quantization.json", "pipeline export RUN --int8"),
    "model_int8_edgetpu": Artifact("model_int8_edgetpu.tflite", "pipeline compile RUN"),
    "edgetpu_report": Artifact("edgetpu.json", "pipeline compile RUN"),
    "parity_report": Artifact("parity/report.json", "pipeline parity RUN"),
    "latency": Artifact("latency.json", "pipeline report RUN --latency FILE"),
}
# `edgetpu_compiler --num_segments N` writes one model per segment, named by the compiler.
_SEGMENT = re.compile(r"model_int8_edgetpu_segment_(\d+)$")


def artifact(key: str) -> Artifact:
    """The table's row for `key` (segment keys included)."""
    if key in ARTIFACTS:
        return ARTIFACTS[key]
    if _SEGMENT.match(key):
        return Artifact("", ARTIFACTS["model_int8_edgetpu"].producer)
    raise KeyError(f"{key!r} is not an artifact of a run; expected one of {', '.join(ARTIFACTS)}")


def is_compiled(key: str) -> bool:
    return key == "model_int8_edgetpu" or bool(_SEGMENT.match(key))


class Run:
    """A run directory and its manifest, as read when it was opened."""

    def __init__(self, run_dir: Path, manifest: Dict[str, Any]):
        self.dir = Path(run_dir)
        self.manifest = manifest

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

    # What stages read -------------------------------------------------------------------------

    @property
    def image_size(self) -> int:
        return int(self._fact("model", "image_size"))

    @property
    def labels(self) -> List[str]:
        return list(self._fact("labels"))

    @property
    def contract(self) -> Dict[str, Any]:
        """The run's pixel contract (edge.preprocess): how images become the model's input, on every side."""
        recorded = self.manifest.get("preprocessing")
        if not isinstance(recorded, dict):
            raise ManifestError("the run records no pixel contract (it was trained by an earlier edgeflow); train it again")
        return recorded

    def contract_of(self, key: str) -> Dict[str, Any]:
        """The pixel contract model `key` takes: its own record (an int8 export takes Coral's mean 128, std 128),
        else the run's (models exported before each model recorded its own)."""
        return self.entry(key).get("preprocessing") or self.contract

    @property
    def global_batch(self) -> int:
        """The global batch `pipeline train` used (QAT fine-tunes at it)."""
        training = self.manifest.get("training")
        batch = training.get("global_batch") if isinstance(training, dict) else None
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ManifestError(
                f"{self.dir / manifest_io.MANIFEST_NAME} records training.global_batch {batch!r}; expected the positive "
                "global batch `pipeline train` writes (QAT fine-tunes at the batch the model was trained with)")
        return batch

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
        path = self.dir / entry["path"]
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

    def _fact(self, *keys: str) -> Any:
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


class Transaction:
    """What one stage writes: artifacts, files that go with them, records to forget, manifest facts."""

    def __init__(self, run: Run):
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
        for key, (path, facts) in self._records.items():
            rel = path.resolve().relative_to(self.run.dir.resolve()).as_posix()
            manifest["artifacts"][key] = {"path": rel, "sha256": digests[key], **facts}
        manifest.update(self._facts)
        with signals_held():  # Ctrl-C and SIGTERM wait for the renames, the commit and the clean-up (or roll-back)
            journal.apply(self.run.dir, self._contents, removing, manifest_io.encode(manifest))
        self.run.manifest = manifest


def _sha256(data: Union[bytes, Path]) -> str:
    return sha256_bytes(data) if isinstance(data, bytes) else sha256_of(data)


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

