"""`--task pose` through every stage with the real head, as a user runs them: `pipeline train` on the built-in figures
(tiny: a minute of CPU), `pipeline export` float and int8, `pipeline parity` (OKS mAP of each model, the int8 gate),
`pipeline predict` (COCO's keypoint results form) and the report; and the commands pose refuses, with the reason."""
from __future__ import annotations

import json
import shutil

import numpy as np

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

from tests.support.helpers import cli  # noqa: E402

pytestmark = [pytest.mark.host, pytest.mark.slow]

DATA = "figures?count=96&size=64&seed=4"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    run = tmp_path_factory.mktemp("pose") / "run"
    steps = (["train", "--task", "pose", "--data", DATA, "--image-size", "64", "--epochs", "3", "--batch-size", "8",
              "--out", str(run)],
             ["export", str(run)],
             ["export", str(run), "--int8", "--calibration-samples", "16"])
    printed = []
    for args in steps:
        result = cli(args, timeout=900)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        printed.append(result.stdout)
    return run, printed


def test_train_and_export_record_the_pose_run(exported):
    run, printed = exported
    manifest = json.loads((run / "manifest.json").read_text())
    heldout = manifest["metrics"]["heldout"]
    assert manifest["task"] == "pose" and manifest["pose"]["keypoints"]["count"] == 7
    assert f"OKS mAP@.5 {heldout['oks_map50']:.4f}" in printed[0]
    assert 0 <= heldout["oks_map"] <= heldout["oks_map50"] <= 1
    for key in ("model_float", "model_int8"):
        assert (run / f"{key}.tflite").is_file() and (run / f"{key}.tflite.json").is_file()
    assert manifest["artifacts"]["model_int8"]["calibration"]["source"] == f"train split of {DATA}"


def test_parity_scores_each_model_by_oks_and_gates_int8(exported, tmp_path):
    """Three epochs at 64 px make a weak model: the limits are given so that this run passes (--min-accuracy 0, a drop
    of up to 100 pp), then tightened so that it fails by each one, the verdict naming which."""
    run = tmp_path / "run"
    shutil.copytree(exported[0], run)
    result = cli(["parity", str(run), "--max-drop", "100", "--min-accuracy", "0"], timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = json.loads((run / "parity" / "report.json").read_text())
    assert report["task"] == "pose" and set(report["models"]) == {"float_savedmodel", "float_tflite_cpu", "int8_cpu"}
    for m in report["models"].values():
        assert 0 <= m["oks_map"] <= m["oks_map50"] <= 1 and set(m["pixel_error"]) >= {"head", "mean"}
    assert report["gate"]["metric"] == "oks_map50" and report["gate"]["passed"]
    assert "int8_cpu" in result.stdout and "OKS@.5" in result.stdout
    assert 'class="numbers pose-parity"' in (run / "report.html").read_text()
    models = report["models"]
    drop = (models["float_savedmodel"]["oks_map50"] - models["int8_cpu"]["oks_map50"]) * 100
    strict = cli(["parity", str(run), "--max-drop", "0", "--min-accuracy", "0"], timeout=900)
    assert strict.returncode == (1 if round(drop, 4) > 0 else 0), strict.stdout[-1500:] + strict.stderr[-1500:]
    if drop > 0:
        assert "int8_cpu: OKS mAP@.5 drop" in strict.stderr and "exceeds --max-drop 0 pp" in strict.stderr
    best = max(m["oks_map50"] for m in models.values())
    floor = cli(["parity", str(run), "--max-drop", "100", "--min-accuracy", f"{min(1.0, best + 0.01):.2f}"], timeout=900)
    assert floor.returncode == 1 and "is under --min-accuracy" in floor.stderr, floor.stderr[-1500:]


def test_predict_writes_coco_keypoint_results(exported, tmp_path):
    from pipeline.tasks.pose.data.specs import open_pose

    images = tmp_path / "images"
    images.mkdir()
    for n, e in enumerate(open_pose("figures?count=3&size=64&seed=11").examples):
        (images / f"{n}.png").write_bytes(e.image)
    out = tmp_path / "poses.json"
    result = cli(["predict", str(exported[0]), "--data", str(images), "--model", "int8", "--out", str(out)], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert rows and {r["image_id"] for r in rows} <= {0, 1, 2}
    assert all(len(r["keypoints"]) == 3 * 7 and len(r["bbox"]) == 4 and r["category"] == "figure" for r in rows)
    assert all(0 <= v <= 64 for r in rows for v in r["keypoints"][0::3])  # x in the image's pixels


def test_pose_refuses_what_it_does_not_build_yet(exported):
    result = cli(["export", str(exported[0]), "--float16"], timeout=300)
    assert result.returncode == 1 and "--float16 on a pose run; expected float32 (no flag) or --int8" in result.stderr
    result = cli(["export", str(exported[0]), "--int8", "--remedy"], timeout=300)
    assert result.returncode == 1 and "--remedy is not built for --task pose yet" in result.stderr
    result = cli(["import", str(exported[0] / "model_int8.tflite"), "--task", "pose", "--data", DATA, "--out",
                  str(exported[0].parent / "imported")], timeout=300)
    assert result.returncode == 1 and "unknown kind .tflite; expected" in result.stderr  # import takes the ONNX file
    assert "Traceback" not in result.stderr


def test_prepare_writes_shards_that_train_reads_as_the_data_they_came_from(tmp_path):
    from pipeline.tasks.pose.data.specs import open_pose

    spec = "figures?count=6&size=48&seed=5"
    result = cli(["prepare", "--task", "pose", spec, "--out", str(tmp_path / "shards")], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    read, made = open_pose(str(tmp_path / "shards" / "*.tfrecord")), open_pose(spec)
    assert read.layout == made.layout and read.labels == made.labels
    assert [e.id for e in read.examples] == [e.id for e in made.examples]
    for a, b in zip(read.examples, made.examples):
        assert a.digest == b.digest and np.allclose(a.keypoints, b.keypoints) and np.allclose(a.boxes, b.boxes)
    again = cli(["prepare", "--task", "pose", spec, "--out", str(tmp_path / "shards")], timeout=300)
    assert again.returncode == 1 and "choose an empty --out" in again.stderr
