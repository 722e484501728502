"""The seam holds: a task from outside pipeline/ (tests/pipeline/tasks/count/, counting squares, a regression)
registers itself and goes through `train`, `export --int8`, `parity`, `predict` and `report` as the stages run
them, with nothing outside its own folder changed."""
from __future__ import annotations

import json

import pytest

from pipeline import tasks

PACKAGE = "tests.pipeline.tasks.count"


@pytest.fixture
def count_task():
    tasks.register("count", PACKAGE)
    yield tasks.get("count")
    tasks.unregister("count")


@pytest.mark.slow  # trains, converts and runs a tiny model: about 30 s on two shared cores
def test_a_task_from_elsewhere_goes_through_every_stage(count_task, tmp_path):
    from pipeline import export, parity, predict, report, train
    from pipeline.rundir.run import Run
    from pipeline.training.config import config_from_options

    run_dir = tmp_path / "run"
    config = config_from_options({"task": "count", "data": "squares", "tensorboard": False}, {})
    assert (config.epochs, config.batch_size) == (2, 16)  # the task's own defaults
    train.train_model(config.validate(), run_dir)
    run = Run.open(run_dir)
    assert run.task == "count" and tasks.of_run(run) is count_task and "mae" in run.heldout_metrics

    exported = export.export_model(export.ExportConfig(mode=export.Mode.INT8), run_dir)
    assert exported.model_path == run_dir / "model_int8.tflite" and exported.sidecar_path.is_file()

    # The task's own option reaches its side of parity; the gate is the shared one, on the task's metric.
    result = parity.check_parity(parity.ParityConfig(max_drop=100.0, min_agreement=0.0, min_accuracy=0.0,
                                                     task_options={"tolerance": 0.5}), run_dir)
    written = json.loads((run_dir / "parity" / "report.json").read_text())
    assert written["tolerance"] == 0.5 and set(written["models"]) == {"float_savedmodel", "int8_cpu"}
    assert written["gate"]["metric"] == "right" and result.passed, result.failures
    with pytest.raises(Exception, match="--count-tolerance -1"):
        parity.check_parity(parity.ParityConfig(task_options={"tolerance": -1.0}), run_dir)

    pictures = tmp_path / "pictures"
    pictures.mkdir()
    from tests.pipeline.tasks.count import data

    for example in data.examples(3, seed=7):
        (pictures / f"{example.id}.png").write_bytes(example.png)
    out = tmp_path / "counts.json"
    predicted = predict.predict_unlabeled(predict.PredictConfig(data=(str(pictures),), out=str(out), model="int8"), run_dir)
    assert predicted.written == 3 and len(json.loads(out.read_text())["predictions"]) == 3

    page = report.write(run_dir, strict=True).read_text()
    assert "Counts within 0.5: float_savedmodel " in page  # the task's own parity section


def test_another_tasks_option_is_refused_on_its_runs_as_the_option_says(count_task):
    from pipeline.errors import ConfigError
    from pipeline.tasks import options

    assert options.for_task("count", "parity", {"top_k": 3}) == {"tolerance": 0.5}  # classify's --top-k: parity ignores it
    with pytest.raises(ConfigError, match="--head yolo is a detector's head"):
        options.for_task("count", "train", {"head": "yolo"})
    assert "count" in tasks.names() and "count" not in tasks.NAMES  # registered, not found in pipeline/tasks/
