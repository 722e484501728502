"""How a transaction reaches the disk so that a SIGKILL or a power cut at any instant leaves the old run or
the new one: a rollback journal, as SQLite keeps one.

    apply(run_dir, contents, removing, manifest_bytes)   # under the run's lock, with signals held
    recover(run_dir)                                      # under the run's lock, when the run is opened

The steps, each durable before the next begins:

1. the journal (`RUN/.journal.json`) records every path the transaction will touch, the temporary name
   (`.NAME.<hex>.tmp`) its new content will have, the second name (`.NAME.<hex>.old`) its old content
   will have, the folders it will make, and the sha256 of the manifest it will commit;
2. every new file is written under its temporary name and fsynced; every file and folder of a prepared
   tree (a SavedModel folder) is fsynced;
3. each old file gets its second name (a hard link; a folder is moved aside), the new one is renamed in,
   and paths to remove are moved aside; their folders are fsynced;
4. the manifest's atomic replace is the commit point (then its folder is fsynced);
5. the old contents and then the journal are removed.

A journal on disk means a transaction did not finish. `recover` reads it: if `manifest.json` is the one
the journal names, the transaction committed and only step 5 is left, so it is done; otherwise every
path is put back from its second name and what the transaction brought is removed. Then leftovers go:
temporary files and `.old` names (`.NAME.<random>.tmp`, `.NAME.<hex>.old`) and scratch folders
(`.PREFIX<random>.tmp`) in RUN and in its folders one level down. Only a holder of the run's lock
recovers, so nothing it removes belongs to a live writer.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from edge.files.bounded import MAX_DOCUMENT_BYTES, loads_json, read_regular
from edge.files.confined import OutsideFolder, inside
from edge.files.atomic import fsync_dir, write_bytes_atomic, write_new_file, write_temp_sibling
from pipeline.rundir.files import fsync_tree
from pipeline.errors import ManifestError
from pipeline.rundir.manifest import MANIFEST_NAME

JOURNAL_NAME = ".journal.json"
JOURNAL_VERSION = 1
# What a writer leaves only while it runs: temporary files, second names, scratch folders.
_LEFTOVER = re.compile(r"^\..+\.(tmp|old)$")


def step(name: str) -> None:
    """Called between every two steps of `apply`; does nothing. It is the one seam a test replaces to stop
    the process (SIGKILL) at a chosen step and check that `recover` leaves the old run or the new one."""


def pending(run_dir: Path) -> bool:
    """Whether a transaction on RUN has not finished (its journal is still there)."""
    return (Path(run_dir) / JOURNAL_NAME).exists()


def apply(run_dir: Path, contents: Dict[Path, Union[bytes, Path]], removing: Sequence[Path], manifest_bytes: bytes) -> None:
    """Put `contents` in place (bytes, or a file or folder prepared on RUN's file system, moved in by rename),
    take `removing` away and commit `manifest_bytes` as RUN/manifest.json, by the steps above. On an exception
    every path is put back as it was. The caller holds RUN's lock and holds Ctrl-C and SIGTERM."""
    run_dir = Path(run_dir)
    record: Dict[str, Any] = {"version": JOURNAL_VERSION, "manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(),
                              "paths": [], "removing": [], "made": []}
    for final, data in contents.items():
        final = Path(final)
        existed = final.exists() or final.is_symlink()
        new = data if isinstance(data, Path) else _temporary_name(final)
        record["paths"].append({"path": _rel(run_dir, final), "new": _rel(run_dir, new), "prepared": isinstance(data, Path),
                                "old": _rel(run_dir, _second_name(final)) if existed else None})
    for gone in map(Path, removing):
        if gone.exists() or gone.is_symlink():
            record["removing"].append({"path": _rel(run_dir, gone), "old": _rel(run_dir, _second_name(gone))})
    made = sorted({d for final in contents for d in Path(final).parents if not d.exists()}, key=lambda d: len(d.parts))
    record["made"] = [_rel(run_dir, d) for d in made]  # shallowest first
    write_bytes_atomic(run_dir / JOURNAL_NAME, json.dumps(record, indent=2).encode())
    try:
        step("journal written")
        for folder in made:
            folder.mkdir(exist_ok=True)
        for entry, data in zip(record["paths"], contents.values()):
            if isinstance(data, Path):
                fsync_tree(data)
            else:
                write_new_file(run_dir / entry["new"], data, run_dir / entry["path"])  # fsynced
            step(f"staged {entry['path']}")
        for folder in made:
            fsync_dir(folder.parent)
        for entry in record["paths"]:
            final, new = run_dir / entry["path"], run_dir / entry["new"]
            if entry["old"] is not None:
                _keep_old(final, run_dir / entry["old"])
                step(f"kept old {entry['path']}")
            os.replace(new, final)
            step(f"moved in {entry['path']}")
        for entry in record["removing"]:
            os.replace(run_dir / entry["path"], run_dir / entry["old"])
            step(f"moved aside {entry['path']}")
        for folder in _folders(run_dir, record):
            fsync_dir(folder)
        step("renames durable")
        _commit_manifest(run_dir, manifest_bytes)
    except BaseException:
        _roll_back(run_dir, record)
        raise
    try:
        _finish(run_dir, record)
    except OSError:
        pass  # committed: what is left (old contents, the journal) is finished when the run is next opened


def recover(run_dir: Path) -> Optional[str]:
    """Finish or roll back a transaction that died half way, then remove leftovers. The caller holds RUN's lock.
    Returns what was done ("rolled back", "finished"), or None when no transaction was pending."""
    run_dir = Path(run_dir)
    done = None
    if pending(run_dir):
        record = _read(run_dir)
        manifest = run_dir / MANIFEST_NAME
        committed = manifest.is_file() and _sha256(manifest) == record.get("manifest_sha256")
        if committed:
            _finish(run_dir, record)
            done = "finished"
        else:
            _roll_back(run_dir, record)
            done = "rolled back"
    remove_leftovers(run_dir)
    return done


def remove_leftovers(run_dir: Path) -> List[Path]:
    """Temporary files, `.old` second names and scratch folders a dead writer left in RUN and in its folders
    one level down (not deeper: a prepared tree is moved in whole). The caller holds RUN's lock."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    folders = [run_dir] + [p for p in run_dir.iterdir() if p.is_dir() and not p.is_symlink()
                           and not p.name.startswith(".")]
    removed = [p for folder in folders for p in folder.iterdir() if _LEFTOVER.match(p.name)]
    for path in removed:
        _remove(path)
    for folder in {p.parent for p in removed}:
        fsync_dir(folder)
    return removed


# ---------------------------------------------------------------------------------------------


def _commit_manifest(run_dir: Path, manifest_bytes: bytes) -> None:
    tmp = write_temp_sibling(run_dir / MANIFEST_NAME, manifest_bytes)  # fsynced
    try:
        step("manifest staged")
        os.replace(tmp, run_dir / MANIFEST_NAME)  # the commit point
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    step("manifest renamed")
    fsync_dir(run_dir)
    step("committed")


def _finish(run_dir: Path, record: Dict[str, Any]) -> None:
    """After the commit: the old contents go, then the journal (a crash in between redoes this)."""
    for entry in record.get("paths", []) + record.get("removing", []):
        if entry["old"] is not None:
            _remove(run_dir / entry["old"])
            step(f"removed old {entry['path']}")
    for folder in _folders(run_dir, record):
        fsync_dir(folder)
    (run_dir / JOURNAL_NAME).unlink(missing_ok=True)
    fsync_dir(run_dir)
    step("journal removed")


def _roll_back(run_dir: Path, record: Dict[str, Any]) -> None:
    """Before the commit: every path back as it was, from its second name; what the transaction brought goes."""
    for entry in reversed(record.get("removing", [])):
        old = run_dir / entry["old"]
        if old.exists() or old.is_symlink():
            os.replace(old, run_dir / entry["path"])
    for entry in reversed(record.get("paths", [])):
        final, new = run_dir / entry["path"], run_dir / entry["new"]
        old = run_dir / entry["old"] if entry["old"] is not None else None
        if old is None:
            _remove(final)  # nothing stood there before: whatever stands there now is new
        elif old.is_dir() and not old.is_symlink():
            _remove(final)  # the new folder, when it was moved in
            os.replace(old, final)
        elif (new.exists() or new.is_symlink()) and (old.exists() or old.is_symlink()):
            old.unlink()  # not moved in: `final` is still the old file, of which this is only a second name
        elif old.exists() or old.is_symlink():
            os.replace(old, final)
        # else: it died before the second name was made, so `final` still holds the old content
        if not entry.get("prepared"):
            _remove(new)  # a temporary this transaction wrote (a prepared tree is its caller's scratch)
    for rel in reversed(record.get("made", [])):
        _rmdir(run_dir / rel)
    for folder in _folders(run_dir, record):
        fsync_dir(folder)
    (run_dir / JOURNAL_NAME).unlink(missing_ok=True)
    fsync_dir(run_dir)


def _keep_old(final: Path, old: Path) -> None:
    """A second name for the content at `final`: a hard link for a file (it stays in place until the new one
    replaces it), a rename for a folder (a rename cannot replace a folder that holds anything)."""
    if final.is_dir() and not final.is_symlink():
        os.replace(final, old)
        return
    try:
        os.link(final, old, follow_symlinks=False)
    except OSError:
        shutil.copy2(final, old, follow_symlinks=False)  # file systems without hard links
        fsync_tree(old)


def _temporary_name(path: Path) -> Path:
    return Path(path).with_name(f".{Path(path).name}.{secrets.token_hex(6)}.tmp")


def _second_name(path: Path) -> Path:
    return Path(path).with_name(f".{Path(path).name}.{secrets.token_hex(6)}.old")


def _folders(run_dir: Path, record: Dict[str, Any]) -> Iterable[Path]:
    return sorted({(run_dir / e["path"]).parent for e in record.get("paths", []) + record.get("removing", [])} | {run_dir})


def _read(run_dir: Path) -> Dict[str, Any]:
    path = run_dir / JOURNAL_NAME
    expected = "the journal of an unfinished transaction"
    try:
        record = loads_json(read_regular(path, MAX_DOCUMENT_BYTES, "journal", ManifestError), str(path), ManifestError, expected)
    except OSError as err:
        raise ManifestError(f"{path} is not readable ({err}); expected {expected}") from err
    if not isinstance(record, dict) or record.get("version") != JOURNAL_VERSION:
        raise ManifestError(f"{path} is not a version {JOURNAL_VERSION} journal; expected the journal this edgeflow writes")
    for section in ("paths", "removing"):
        entries = record.get(section)
        if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("path"), str)
                                                    and isinstance(e.get("old"), (str, type(None))) for e in entries):
            raise ManifestError(f"{path} records {section} {entries!r}; expected a list of {{path, old}} entries")
    made = record.get("made", [])
    if not isinstance(made, list):
        raise ManifestError(f"{path} records made {made!r}; expected a list of folders inside {run_dir}")
    # Every path recovery may delete, rename or write, checked before any is touched: inside RUN, and through
    # no symlink (a path that passes as text can still leave RUN through one).
    named = [entry.get(key) for section in ("paths", "removing") for entry in record[section]
             for key in ("path", "old", "new") if entry.get(key) is not None] + made
    for rel in named:
        try:
            inside(run_dir, rel, "path")
        except OutsideFolder as err:
            raise ManifestError(f"{path} (an unfinished transaction's journal) is refused: {err}; nothing was "
                                "changed; remove the journal if this run came from somewhere you do not trust") from None
    return record


def _rel(run_dir: Path, path: Path) -> str:
    rel = Path(os.path.relpath(Path(path).absolute(), Path(run_dir).absolute())).as_posix()
    try:
        inside(run_dir, rel, "path")
    except OutsideFolder as err:
        raise ManifestError(f"{err}: a transaction writes only inside its run") from None
    return rel


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _rmdir(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # not empty, or gone
