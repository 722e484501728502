"""`edge detect --out DIR` never writes over its input images, keeps what is already in DIR unless --overwrite, and
writes each annotated image atomically (issue 39: it overwrote the input images, not atomically)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from edge.files.outputs import check_output
from edge.errors import InputError
from tests.support.edge_paths import FIXTURES, IMAGES, run_edge

DETECTOR = FIXTURES / "tiny_detector_int8.tflite"


@pytest.fixture
def photos(tmp_path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("red.png", "green.png"):
        shutil.copy(IMAGES / name, folder / name)
    return folder


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_detect_out_onto_its_own_inputs_is_refused_even_with_overwrite(photos):
    before = _snapshot(photos)
    for extra in ([], ["--overwrite"]):
        result = run_edge("detect", "--no-verify", DETECTOR, photos / "red.png", photos / "green.png", "--out", photos, *extra)
        assert result.exit_code == 1, result.output
        assert "is one of the inputs" in result.stderr
    assert _snapshot(photos) == before


def test_detect_keeps_an_existing_file_unless_overwrite(photos, tmp_path):
    out = tmp_path / "annotated"
    out.mkdir()
    (out / "red.png").write_bytes(b"mine")
    result = run_edge("detect", "--no-verify", DETECTOR, photos / "red.png", "--threshold", "0", "--out", out)
    assert result.exit_code == 1 and "exists; pass --overwrite" in result.stderr, result.output
    assert (out / "red.png").read_bytes() == b"mine"
    result = run_edge("detect", "--no-verify", DETECTOR, photos / "red.png", "--threshold", "0", "--out", out, "--overwrite")
    assert result.exit_code == 0, result.stderr
    assert (out / "red.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in out.iterdir()) == ["red.png"]  # no temporary left beside it


def test_an_output_inside_a_run_directory_is_refused(tmp_path):
    run = tmp_path / "run"
    (run / "parity").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    for path in (run / "manifest.json", run / "parity" / "x.csv", run / "new.csv"):
        with pytest.raises(InputError, match="is inside the run directory"):
            check_output(path, overwrite=True)
    assert check_output(tmp_path / "fine.csv", overwrite=False) == tmp_path / "fine.csv"
