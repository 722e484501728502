"""Parity's client advice sized to its judge, followed on a case where the run's tuning split cannot see the loss.

The halftone pictures of test_remedy.py with a milder gain (MediaPipe's samples 1.5 times the contrast): int8
as MediaPipe feeds loses a few pp against the float model fed alike, too few for the 24 tuning images a default run
sets aside to tell from none (a model losing that much passes them about 40% of the time; `export --remedy
--clients mediapipe` there keeps the export as asked, as in issue 55's photo case). Parity names the tuning
fraction that can see it, then the remedy; run as written, MediaPipe must end within 2 pp of the int8 model fed the
contract, or parity must say that nothing edgeflow runs can check a repair.
"""
from __future__ import annotations

import json

import pytest

from tests.commands.advice.test_commands import RELAXED, _pipeline, advised, follow
from tests.commands.advice.test_remedy import write_halftone_pngs

pytestmark = [pytest.mark.host, pytest.mark.slow]

GAIN = 1.5
TRAIN = ("--image-size", "16", "--epochs", "12", "--no-tensorboard")


def _worst_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("worst client: "))


def test_a_loss_the_tuning_split_cannot_see_is_repaired_by_following_the_advice(tmp_path):
    train = write_halftone_pngs(tmp_path / "train", per_class=60, seed=0, gain=GAIN)
    val = write_halftone_pngs(tmp_path / "val", per_class=50, seed=1, gain=GAIN)
    options = ("--data", str(train), "--val-data", str(val), *TRAIN)
    run = tmp_path / "run"
    assert _pipeline("train", *options, "--out", run).exit_code == 0
    assert _pipeline("export", run, "--int8", "--no-layer-errors").exit_code == 0
    result = _pipeline("parity", run, *RELAXED)
    assert result.exit_code == 0, result.output
    line = _worst_line(result.output)
    assert "cannot see this loss yet" in line, line
    steps = advised(line)
    assert len(steps) == 2 and steps[0].startswith("pipeline train ... --tuning-fraction ") and \
        steps[1] == "pipeline export RUN --int8 --remedy --clients mediapipe", steps
    followed = tmp_path / "followed"
    follow(steps[0].replace("...", " ".join([*options, "--out", str(followed)])), followed)
    follow(steps[-1], followed, exits=(0, 1))  # nothing passing is said by parity next
    result = _pipeline("parity", followed, *RELAXED)
    assert result.exit_code == 0, result.output
    report = json.loads((followed / "parity" / "report.json").read_text())
    gap = report["models"]["int8_cpu"]["top1"] - report["clients"]["mediapipe"]["top1"]
    line = _worst_line(result.output)
    assert gap <= 0.02 or "nothing edgeflow runs can check a repair" in line, (gap, line)
