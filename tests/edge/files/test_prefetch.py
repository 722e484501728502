"""Decoding ahead of the interpreter: input order, bounded look-ahead, a damaged image reported by name
while the others are scored."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from edge.errors import InputError
from edge.model.integrity import write_sidecar
from edge.files.prefetch import prefetch
from edge.pixels.contract import PixelContract
from tests.support.edge_paths import IMAGES, LABELS, run_edge


_run = run_edge


def test_results_keep_input_order_and_errors_stay_with_their_item():
    def load(i):
        if i == 3:
            raise InputError(f"cannot read image {i}")
        return i * 10

    got = list(prefetch(range(8), load, ahead=3))
    assert [item for item, _, _ in got] == list(range(8))
    assert [value for _, value, _ in got] == [0, 10, 20, None, 40, 50, 60, 70]
    assert [str(e) for _, _, e in got if e is not None] == ["cannot read image 3"]


def test_look_ahead_is_bounded():
    started = []

    def load(i):
        started.append(i)
        return i

    items = iter(range(100))
    stream = prefetch(items, load, ahead=4)
    first = next(stream)
    assert first[0] == 0
    # Nothing consumed past the window: the source was read only as far as the look-ahead allows.
    assert next(items) == 4
    stream.close()
    assert max(started) <= 3


def test_other_errors_are_not_swallowed():
    def load(i):
        raise MemoryError("machine fault")

    with pytest.raises(MemoryError):
        list(prefetch(range(3), load))


def _folders_with_a_damaged_image(root: Path) -> Path:
    for name in LABELS:
        (root / name).mkdir(parents=True)
        shutil.copy(IMAGES / f"{name}.png", root / name / "a.png")
        shutil.copy(IMAGES / f"{name}.png", root / name / "c.png")
    # In the middle of the order: green/b.png, between green/a.png and green/c.png.
    (root / "green" / "b.png").write_bytes((IMAGES / "green.png").read_bytes()[:40])
    return root


def test_evaluate_reports_a_damaged_image_by_name_and_scores_the_others(int8_copy: Path, tmp_path: Path):
    write_sidecar(int8_copy, labels=LABELS, preprocessing=PixelContract().as_record())
    out = tmp_path / "p.json"
    result = _run("evaluate", int8_copy, "--data", _folders_with_a_damaged_image(tmp_path / "data"), "--out", out)
    assert result.exit_code == 1, result.stderr
    assert "green/b.png" in result.stderr and "1 of 7 images could not be read" in result.stderr
    assert "Traceback" not in result.stderr
    got = json.loads(out.read_text())
    assert [p["file"] for p in got["predictions"]] == ["blue/a.png", "blue/c.png", "green/a.png", "green/c.png", "red/a.png", "red/c.png"]
    assert got["top1_accuracy"] == 1.0
    assert [e["file"] for e in got["errors"]] == ["green/b.png"] and "b.png" in got["errors"][0]["error"]


def test_classify_reports_a_damaged_image_by_name_and_classifies_the_others(int8_copy: Path, tmp_path: Path):
    write_sidecar(int8_copy, labels=LABELS, preprocessing=PixelContract().as_record())
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    result = _run("classify", int8_copy, IMAGES / "red.png", bad, IMAGES / "blue.png", "--top-k", "1")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"{IMAGES / 'red.png'}:", result.stdout.splitlines()[1],
                                          f"{IMAGES / 'blue.png'}:", result.stdout.splitlines()[3]]
    assert result.stdout.splitlines()[1].split()[1] == "red" and result.stdout.splitlines()[3].split()[1] == "blue"
    assert f"cannot read image {bad}" in result.stderr and "1 of 3 images could not be read" in result.stderr
