"""`pipeline train --task pose` through the train stage, on the built-in figures: the plan, the batches, the held-out OKS
scores and what the manifest records (the keypoint layout and its sigmas' source, the data's identity, the head's
entry), the report's pose section, and the options the task refuses."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

pytestmark = [pytest.mark.host, pytest.mark.slow]

DATA = "figures?count=40&size=64&seed=2"


def _config(**given):
    from pipeline.training.config import TrainConfig

    return TrainConfig(**{"task": "pose", "data": DATA, "model": "small_cnn", "image_size": 64, "epochs": 2,
                          "batch_size": 8, "tensorboard": False, **given})


def test_train_records_heldout_oks_and_the_keypoint_layout(tmp_path, capsys):
    from pipeline.data import Split
    from pipeline.tasks.pose.data.specs import open_pose
    from pipeline.train import train_model

    from pipeline.tasks.pose import heads

    run_dir = train_model(_config(), tmp_path / "run")
    printed = capsys.readouterr().out
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["task"] == "pose" and manifest["labels"] == ["figure"]
    heldout = manifest["metrics"]["heldout"]
    assert 0 <= heldout["oks_map"] <= heldout["oks_map50"] <= 1 and 0 <= heldout["box_map"] <= 1
    assert f"OKS mAP@.5 {heldout['oks_map50']:.4f}" in printed
    error = manifest["metrics"]["heldout_pixel_error"]
    assert error["objects"] == heldout["objects"] and {"head", "mean", "matched"} <= set(error)
    keypoints = manifest["pose"]["keypoints"]
    assert keypoints["names"] == ["head", "neck", "left_hand", "right_hand", "hip", "left_foot", "right_foot"]
    assert keypoints["flip_idx"] == [0, 1, 3, 2, 4, 6, 5] and keypoints["sigmas_source"] == "default"
    assert manifest["pose"]["head"] == heads.DEFAULT and manifest["pose"]["max_boxes"] == 16
    assert manifest["metrics"]["evaluation"]["sigmas"] == keypoints["sigmas"]
    source = open_pose(DATA)
    expected = [[source.examples[i].id, source.examples[i].digest] for i in source.indices("heldout", Split(0.2, 1234))]
    assert manifest["data"]["identity"]["heldout"]["examples"] == expected
    assert manifest["data"]["identity"]["keypoints"] == keypoints["names"]
    poses = json.loads((run_dir / "heldout_poses.json").read_text())
    assert [image["id"] for image in poses["images"]] == [ident for ident, _ in expected]
    assert poses["samples"] and len(poses["images"][0]["poses"][0]["keypoints"]) == 7
    assert (run_dir / "saved_model").is_dir()
    page = (run_dir / "report.html").read_text()
    assert 'id="pose"' in page and "could not be read" not in page
    assert f'data-value="pose.oks_map50">{heldout["oks_map50"]:.4f}' in page
    assert page.count('<img alt="figures/') == len(poses["samples"])  # the drawn held-out images


@pytest.mark.parametrize("given, says", [
    ({"weights": "imagenet"}, "--task pose: --weights imagenet for small_cnn"),
    ({"image_size": 80}, "--task pose: image size 80; expected a multiple of 32"),
    ({"frozen_epochs": 1, "weights": "imagenet", "model": "mobilenet_v2"}, "--task pose trains the whole model"),
])
def test_options_the_task_cannot_honour_are_refused(given, says):
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match=says.replace(".", r"\.")):
        _config(**given).validate()


def test_remedy_is_refused_with_the_reason():
    from pipeline import tasks
    from pipeline.errors import ConfigError

    task = tasks.get("pose")  # import is built (tests/pipeline/tasks/pose/heads/yolo/test_import.py)
    with pytest.raises(ConfigError, match="--remedy is not built for --task pose"):
        task.tuning()


def test_head_option_is_the_pose_tasks_own():
    from pipeline.errors import ConfigError
    from pipeline.tasks import options
    from pipeline.tasks.pose import heads

    assert options.for_task("pose", "train", {})["head"] == heads.DEFAULT
    assert options.for_task("pose", "train", {"head": heads.DEFAULT, "max_boxes": 4}) == {"head": heads.DEFAULT, "max_boxes": 4}
    with pytest.raises(ConfigError, match="--task pose: head 'ssd'; expected one of"):
        options.for_task("pose", "train", {"head": "ssd"})
    with pytest.raises(ConfigError, match="max_boxes 0, expected at least 1"):
        options.for_task("pose", "train", {"max_boxes": 0})
