"""When no int8 export can keep the answers, parity names the repair that works, and doing it passes the gate.

Issue 55's MobileNetV2 photo case (bench/results/remedy.md sections 12-15): MobileNetV2 0.35 at 96 px, 15 epochs,
on 240 photo crops (24 set aside for tuning): int8 parts from float on the float model's near ties, and the default
gate fails on held-out. Parity's last line says why and how many training images should leave few enough near
ties; the test writes that many crops (what the user gathers), trains with the same options, exports and runs
parity with the default gate, which must pass. Two MobileNetV2 trainings (240 and about 1,100 crops): 193-342 s
of wall time on 2 cores at a load of 5-13.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.helpers import cli

pytestmark = [pytest.mark.host, pytest.mark.slow]

OPTIONS = ("--model", "mobilenet_v2", "--alpha", "0.35", "--image-size", "96", "--epochs", "15", "--no-tensorboard")
WANTED = re.compile(r"train on about (\d+) images \(this run trained on (\d+); (\d+) with ([0-9.]+) set aside for tuning\)")


class Ran(NamedTuple):
    exit_code: int
    output: str  # stdout, then stderr


def _pipeline(*args) -> Ran:
    """`pipeline ARGS` in a fresh process, as a user runs it: no state of the tests before it in this worker."""
    done = cli([str(a) for a in args], timeout=1500)
    return Ran(done.returncode, done.stdout + done.stderr)


def _crops(root: Path, per_class: int, seed: int) -> Path:
    from bench.clients.classify import write_photo_crops
    return write_photo_crops(root, per_class=per_class, seed=seed)


def test_training_on_as_many_images_as_parity_names_passes_the_gate(tmp_path):
    val = _crops(tmp_path / "val", 40, 1)
    run = tmp_path / "run"
    assert _pipeline("train", "--data", _crops(tmp_path / "train", 60, 0), "--val-data", val, *OPTIONS,
                     "--out", run).exit_code == 0
    assert _pipeline("export", run, "--int8", "--no-layer-errors").exit_code == 0
    failed = _pipeline("parity", run)
    assert failed.exit_code == 1, failed.output
    why = next((line for line in failed.output.splitlines() if line.startswith("why: ")), None)
    assert why is not None, failed.output  # the near ties explain the failure
    wanted = WANTED.search(why)
    assert wanted and "no `export --remedy` rung repairs that" in why, why
    total = int(wanted.group(3))
    report = json.loads((run / "parity" / "report.json").read_text())
    assert report["near_ties"]["train_on"] == int(wanted.group(1)), report["near_ties"]

    more = _crops(tmp_path / "more", math.ceil(total / 4), 0)  # four classes: at least `total` images
    again = tmp_path / "again"
    assert _pipeline("train", "--data", more, "--val-data", val, *OPTIONS, "--out", again).exit_code == 0
    assert _pipeline("export", again, "--int8", "--no-layer-errors").exit_code == 0
    passed = _pipeline("parity", again)
    assert passed.exit_code == 0, passed.output
