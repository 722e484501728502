"""edge.files.atomic (the one atomic writer, durable with fsync) and edge.pixels.image_files (one list of image suffixes)."""
from __future__ import annotations

import io
import json
import os
import signal
import tempfile

import numpy as np
import pytest

from edge.files import atomic
from edge.pixels.image_files import IMAGE_SUFFIXES, is_image_file
from tests.support.signal_moments import Terminated, signal_when_made


def _record_fsyncs(monkeypatch):
    """Every fsync, named by what the descriptor was: 'file' or 'dir'."""
    calls = []
    real = os.fsync

    def spy(fd):
        calls.append("dir" if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")) else "file")
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls


def test_writer_fsyncs_the_file_and_its_folder(tmp_path, monkeypatch):
    calls = _record_fsyncs(monkeypatch)
    path = atomic.write_json_atomic(tmp_path / "sub" / "out.json", {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1} and path.read_bytes().endswith(b"\n")
    assert calls == ["file", "dir"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.json"]


def test_failed_rename_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space"):
        atomic.write_bytes_atomic(path, b"new")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["model.tflite"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_writing_waits_for_the_rename_and_leaves_no_temporary(tmp_path, monkeypatch, signum):
    with signal_when_made(monkeypatch, "mkstemp", signum) as stopped_by:
        with pytest.raises(stopped_by):
            atomic.write_bytes_atomic(tmp_path / "model.tflite", b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["model.tflite"]  # written whole, then the signal took effect
    assert (tmp_path / "model.tflite").read_bytes() == b"new"


def test_a_sigterm_while_writing_is_not_lost_behind_an_ignored_ctrl_c(tmp_path, monkeypatch):
    """Started with Ctrl-C ignored (`nohup`, a background job), a SIGINT and then a SIGTERM land while writing: the
    SIGINT stays ignored and the SIGTERM takes effect once the file is in place."""
    real = tempfile.mkstemp

    def make_then_signal(*args, **kwargs):
        made = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        return made

    def terminated(signum, frame):
        raise Terminated()

    monkeypatch.setattr(tempfile, "mkstemp", make_then_signal)
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
                signal.SIGTERM: signal.signal(signal.SIGTERM, terminated)}
    try:
        with pytest.raises(Terminated):
            atomic.write_bytes_atomic(tmp_path / "model.tflite", b"new")
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert [p.name for p in tmp_path.iterdir()] == ["model.tflite"]
    assert (tmp_path / "model.tflite").read_bytes() == b"new"


def test_sidecar_writer_is_the_durable_one(tmp_path, monkeypatch):
    from edge.model.integrity import write_sidecar

    model = tmp_path / "m.tflite"
    model.write_bytes(b"bytes")
    calls = _record_fsyncs(monkeypatch)
    write_sidecar(model, labels=["a", "b"])
    assert calls == ["file", "dir"]  # it used to write a .tmp and rename without any fsync
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tflite", "m.tflite.json"]


def test_pipeline_writes_through_the_same_writer():
    from pipeline.rundir import files

    assert files.write_bytes_atomic is atomic.write_bytes_atomic
    assert files.write_json_atomic is atomic.write_json_atomic


@pytest.mark.parametrize("suffix", IMAGE_SUFFIXES)
def test_every_image_suffix_decodes_with_pillow(tmp_path, suffix):
    from PIL import Image

    path = tmp_path / f"x{suffix.upper()}"
    Image.fromarray(np.full((6, 6, 3), 100, np.uint8)).save(path)
    assert is_image_file(path)
    with Image.open(path) as image:
        assert image.convert("RGB").size == (6, 6)


@pytest.mark.host
@pytest.mark.parametrize("suffix", IMAGE_SUFFIXES)
def test_every_image_suffix_decodes_with_tensorflow(suffix):
    import tensorflow as tf
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.full((6, 6, 3), 100, np.uint8)).save(out, format=Image.registered_extensions()[suffix])
    assert tuple(tf.io.decode_image(out.getvalue(), channels=3, expand_animations=False).shape) == (6, 6, 3)


def test_not_images(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "folder.png").mkdir()
    assert not is_image_file(tmp_path / "notes.txt") and not is_image_file(tmp_path / "folder.png")
