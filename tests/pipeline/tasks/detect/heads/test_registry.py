"""The heads' registry (pipeline/tasks/detect/heads/__init__.py): the names --head offers, the default, a run's head, and
the head that imports; without TensorFlow (the registry is read when the command line is built)."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from pipeline.errors import ConfigError
from pipeline.tasks.detect import heads
from pipeline.tasks.detect.heads.head import Head


def test_every_name_gives_its_head_and_the_default_is_one_of_them():
    assert heads.DEFAULT in heads.NAMES and len(set(heads.NAMES)) == len(heads.NAMES)
    for name in heads.NAMES:
        assert isinstance(heads.get(name), Head) and heads.get(name).name == name


def test_an_unknown_head_is_refused_naming_the_known_ones():
    with pytest.raises(ConfigError, match="--head nope; expected one of " + ", ".join(heads.NAMES)):
        heads.get("nope")


def test_a_run_that_records_no_head_is_read_by_the_first_head_runs_had():
    recorded = SimpleNamespace(detection={"head": heads.NAMES[-1]})
    assert heads.of_run(recorded).name == heads.NAMES[-1]
    assert heads.of_run(SimpleNamespace(detection={})).name == heads.UNRECORDED
    assert heads.of_run(SimpleNamespace(detection=None)).name == heads.UNRECORDED


def test_one_head_imports_and_it_has_import_steps():
    assert heads.importing().import_steps() is not None


def test_the_registry_imports_no_tensorflow():
    code = "import sys; from pipeline.tasks.detect import heads; heads.get(heads.DEFAULT); print('tensorflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
