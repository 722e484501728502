"""--clients names per task: a detector client (frigate) is refused on a classification run and the other way round,
"all" means the run's own task's clients, and `pipeline run` refuses a name its task has no client for before it
trains anything."""
from __future__ import annotations

import pytest

from pipeline.errors import ConfigError
from pipeline.inference.client_scores import for_task, gateable, parse_clients


def test_each_task_has_its_own_gateable_clients():
    assert gateable("classify") == ("pycoral", "mediapipe")
    assert gateable("detect") == ("pycoral", "mediapipe", "frigate")


def test_all_waits_for_the_task_and_then_means_its_clients():
    assert parse_clients("all") == ("all",)
    assert for_task(parse_clients("all"), "detect") == ("pycoral", "mediapipe", "frigate")
    assert for_task(parse_clients("ALL"), "classify") == ("pycoral", "mediapipe")
    assert for_task(parse_clients("none"), "detect") == for_task(parse_clients(""), "classify") == ()


def test_names_come_back_in_the_tables_order():
    assert for_task(parse_clients("frigate, pycoral"), "detect") == ("pycoral", "frigate")


@pytest.mark.parametrize("text, task, needle", [
    ("frigate", "classify", "unknown client frigate for a classify run; expected a comma-separated list of pycoral, mediapipe"),
    ("pycoral,tensorflowjs", "detect", "unknown client tensorflowjs for a detect run; expected a comma-separated list of "
                                       "pycoral, mediapipe, frigate"),
    ("edgeflow", None, "unknown client edgeflow; expected a comma-separated list of pycoral, mediapipe, frigate"),
])
def test_a_name_the_task_has_no_client_for_is_refused_with_the_list(text, task, needle):
    with pytest.raises(ConfigError) as caught:
        for_task(text.split(","), task) if task else parse_clients(text)
    assert needle in str(caught.value)


@pytest.mark.host
@pytest.mark.parametrize("task", [[], ["--task", "classify"]])
def test_pipeline_run_refuses_a_detector_client_on_a_classification_run_before_training(tmp_path, task):
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["run", *task, "--out", str(tmp_path / "new"), "--clients", "frigate"])
    assert 0 < result.exit_code < 128 and "Traceback" not in result.output
    assert "unknown client frigate for a classify run" in result.output
    assert not (tmp_path / "new").exists()
