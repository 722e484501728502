"""The commands' help texts: the words that differ by task come from each task's options.py, every task's in each."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from pipeline import cli
from pipeline.tasks.options import said


def _help(command: str) -> str:
    result = CliRunner().invoke(cli.main, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize("command", ["parity", "run"])
def test_the_gate_s_help_gives_every_task_s_words(command):
    text = _help(command)
    for task, words in said("GATE_HELP"):
        for key, phrase in words.items():
            assert f"{task}: {' '.join(phrase.split())}" in text, (command, task, key)


def test_import_s_help_says_what_each_task_imports():
    text = _help("import")
    for task, words in said("IMPORTS"):
        assert f"{task}, {words}" in text
