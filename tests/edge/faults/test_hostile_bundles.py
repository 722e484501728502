"""A bundle's `file` entries stay inside the bundle folder and are bounded (issue 39: absolute paths, `../`, symlinks,
a FIFO and a 6 GB sparse file were all followed and hashed into the device results)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge import InputError
from edge.documents.bundle import read_bundle
from tests.support.edge_paths import IMAGES, INT8

REPO = Path(__file__).resolve().parents[3]


def _bundle(tmp_path, file: str, labels=("red", "green", "blue")) -> Path:
    folder = tmp_path / "bundle"
    (folder / "heldout").mkdir(parents=True, exist_ok=True)
    (folder / "heldout" / "ok.png").write_bytes((IMAGES / "red.png").read_bytes())
    (folder / "bundle.json").write_text(json.dumps({"schema_version": 2, "labels": labels,
                                                    "images": [{"file": "heldout/ok.png", "label": 0},
                                                               {"file": file, "label": 0}]}))
    return folder


def _secret(tmp_path) -> Path:
    secret = tmp_path / "elsewhere" / "secret.png"
    secret.parent.mkdir()
    secret.write_bytes((IMAGES / "green.png").read_bytes())
    return secret


def test_an_absolute_file_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"images\[1\] file .*secret.png.* is outside"):
        read_bundle(_bundle(tmp_path, str(_secret(tmp_path))))


def test_a_dotdot_file_is_refused(tmp_path):
    _secret(tmp_path)
    with pytest.raises(InputError, match=r"'../elsewhere/secret.png' is outside"):
        read_bundle(_bundle(tmp_path, "../elsewhere/secret.png"))


def test_a_file_through_a_symlinked_folder_is_refused(tmp_path):
    secret = _secret(tmp_path)
    folder = _bundle(tmp_path, "linked/secret.png")
    (folder / "linked").symlink_to(secret.parent)
    with pytest.raises(InputError, match="goes through the symlink"):
        read_bundle(folder)


def test_a_symlinked_file_is_refused(tmp_path):
    secret = _secret(tmp_path)
    folder = _bundle(tmp_path, "heldout/link.png")
    (folder / "heldout" / "link.png").symlink_to(secret)
    with pytest.raises(InputError, match="goes through the symlink"):
        read_bundle(folder)


def test_a_fifo_is_refused_at_once(tmp_path):
    folder = _bundle(tmp_path, "heldout/pipe.png")
    os.mkfifo(folder / "heldout" / "pipe.png")
    start = time.monotonic()
    with pytest.raises(InputError, match="is a FIFO, not a regular file"):
        read_bundle(folder)
    assert time.monotonic() - start < 5


def test_a_6_gb_sparse_file_is_refused_from_its_size(tmp_path):
    folder = _bundle(tmp_path, "heldout/huge.png")
    with open(folder / "heldout" / "huge.png", "wb") as f:
        f.truncate(6 << 30)
    with pytest.raises(InputError, match=r"huge.png is 6442450944 bytes, more than"):
        read_bundle(folder)


@pytest.mark.parametrize("labels", [5, "red", [1, 2]])
def test_labels_that_are_not_names_are_one_line(labels, tmp_path):
    with pytest.raises(InputError, match="has labels .*expected a list of class names"):
        read_bundle(_bundle(tmp_path, "heldout/ok.png", labels=labels))


def test_edge_evaluate_refuses_a_bundle_with_a_fifo_and_stops_on_one_sigterm(tmp_path):
    folder = _bundle(tmp_path, "heldout/pipe.png")
    os.mkfifo(folder / "heldout" / "pipe.png")
    child = subprocess.Popen([sys.executable, "-m", "edge.cli", "evaluate", "--no-verify", str(INT8), "--data", str(folder), "--out", str(tmp_path / "p.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        out, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.terminate()  # one SIGTERM must be enough
        out, err = child.communicate(timeout=10)
        pytest.fail(f"edge evaluate waited on a FIFO; after one SIGTERM it exited {child.returncode}")
    assert child.returncode == 1 and "Traceback" not in err, err[-2000:]
    assert "FIFO" in err


def test_an_image_replaced_after_the_bundle_was_checked_is_not_scored_under_the_old_hash(tmp_path):
    """The bytes hashed are the bytes decoded: an image swapped between read_bundle's check and its decoding is an
    error for that image (issue 39: it was scored under the old hash)."""
    import hashlib

    from edge.answers.evaluation import list_samples, source_of

    folder = _bundle(tmp_path, "heldout/ok.png")
    doc = json.loads((folder / "bundle.json").read_text())
    for entry in doc["images"]:
        entry["sha256"] = hashlib.sha256((folder / entry["file"]).read_bytes()).hexdigest()
    doc["images"] = doc["images"][:1]
    (folder / "bundle.json").write_text(json.dumps(doc))
    samples, _ = list_samples(folder, ["red", "green", "blue"])
    assert isinstance(source_of(samples[0]), bytes)
    (folder / "heldout" / "ok.png").write_bytes((IMAGES / "blue.png").read_bytes())  # replaced mid-run
    with pytest.raises(InputError, match="changed while the bundle was being evaluated"):
        source_of(samples[0])
