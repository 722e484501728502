"""Every command `pipeline parity` and `pipeline export` suggest, run on a case where it is the right advice.

Advice is a claim: each test reads the suggested command out of the stage's own message (the text between
backticks, so a message that names a wrong command fails here), runs it as written (RUN replaced by the run's
folder; a training command gets the tests' small-model options added), and checks the stage that suggested it then
does what it could not before.
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.support.helpers import copy_of

pytestmark = pytest.mark.host

ADVISED = re.compile(r"`(pipeline [^`]+)`")
SMALL = ("--data", "digits", "--image-size", "16", "--epochs", "2", "--no-tensorboard")  # the tests' cheap training
RELAXED = ("--max-drop", "100", "--min-agreement", "0")  # parity's report without a gate verdict in the way


def _pipeline(*args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def advised(text: str) -> list:
    """The `pipeline ...` commands a message suggests, as written."""
    return ADVISED.findall(text)


def follow(command: str, run: Path, *extra, exits=(0,)):
    """Run an advised command through the CLI, RUN meaning `run`; `extra` options appended."""
    words = shlex.split(command)
    assert words[0] == "pipeline" and "..." not in words, command
    result = _pipeline(*[str(run) if w == "RUN" else w for w in words[1:]], *extra)
    assert result.exit_code in exits, (command, result.output[-2000:])
    return result


def test_following_parity_from_an_empty_folder_ends_in_a_report(tmp_path):
    """`parity` of a folder that is not yet a run names the stage that is missing, and so on: doing what it says,
    stage by stage, ends in a parity report. `export` of that folder names the same training command."""
    run = tmp_path / "run"
    exported = _pipeline("export", run, "--int8")
    assert 0 < exported.exit_code < 128
    followed = []
    for _ in range(4):
        result = _pipeline("parity", run, *RELAXED)
        if result.exit_code == 0:
            break
        assert 0 < result.exit_code < 128 and "Traceback" not in result.output
        (command,) = advised(result.output)
        assert command not in followed, f"the same advice twice: {command}"
        followed.append(command)
        follow(command, run, *(SMALL if command.startswith("pipeline train ") else ()))
    assert result.exit_code == 0, result.output
    assert followed[0].startswith("pipeline train ") and advised(exported.output) == followed[:1], followed
    assert [c for c in followed[1:] if not c.startswith("pipeline export RUN")] == [] and len(followed) > 1, followed
    assert json.loads((run / "parity" / "report.json").read_text())["models"]["int8_cpu"]["images"] > 0


def test_a_changed_model_file_is_put_right_by_the_command_named(exported_run, tmp_path):
    run = copy_of(exported_run, tmp_path)
    model = run / "model_int8.tflite"
    model.write_bytes(model.read_bytes() + b"\0")  # changed after export recorded it
    refused = _pipeline("parity", run, *RELAXED)
    assert 0 < refused.exit_code < 128 and "changed after it was recorded" in refused.output
    (command,) = advised(refused.output)
    follow(command, run)
    assert _pipeline("parity", run, *RELAXED).exit_code == 0


def test_client_rows_from_before_the_float_model_was_fed_alike_are_answered_by_parity_again(exported_run, tmp_path):
    """A manifest whose client rows lack the float model fed alike (parity before it was measured) gets the remedy
    advice with "run `pipeline parity RUN` again" to tell which loss it is; running that, the rows hold it and the
    advice is decided (the session's digits run: MediaPipe loses 3 pp beyond the contract)."""
    from pipeline.inference.parity_report import worst_client
    from pipeline.tasks.classify.report import WORST

    run = copy_of(exported_run, tmp_path)
    assert _pipeline("parity", run, *RELAXED).exit_code == 0
    manifest_path = run / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for row in manifest["parity"]["clients"].values():
        row.pop("float_fed_alike", None)
    manifest_path.write_text(json.dumps(manifest))
    old = worst_client(manifest["parity"]["clients"], WORST)
    commands = advised(old)
    assert any(c == "pipeline parity RUN" for c in commands), old
    follow("pipeline parity RUN", run, exits=(0, 1))  # the default gate may fail the tiny model: its rows are written
    clients = json.loads(manifest_path.read_text())["parity"]["clients"]
    assert all("float_fed_alike" in row for row in clients.values() if "refused" not in row)
    assert "`pipeline parity RUN` again" not in worst_client(clients, WORST)
