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


def test_parity_data_scores_another_set_and_refuses_the_training_one(exported, tmp_path):
    """`pipeline parity RUN --data SPEC` of a pose run: the built-in set drawn from another seed is scored (the report
    names it and its size); the set the run trained on is refused by content, and nothing is written."""
    run = tmp_path / "run"
    shutil.copytree(exported[0], run)
    other = "figures?count=12&size=64&seed=9"
    result = cli(["parity", str(run), "--data", other, "--max-drop", "100", "--min-accuracy", "0"], timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    heldout = json.loads((run / "parity" / "report.json").read_text())["heldout"]
    assert heldout["source"] == other and heldout["images"] == 12 and heldout["trained_on_checked"] is True
    assert result.stdout.startswith(f"held-out images: 12 ({heldout['objects']} objects) from {other}")
    before = (run / "manifest.json").read_bytes()
    refused = cli(["parity", str(run), "--data", DATA], timeout=900)
    assert refused.returncode == 1 and "images are ones this run trained on, by content" in refused.stderr, refused.stderr
    assert "another seed, as in figures?seed=1" in refused.stderr and "Traceback" not in refused.stderr
    assert (run / "manifest.json").read_bytes() == before


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


CLIENTS = {"ultralytics", "pycoral", "mediapipe", "frigate"}


def test_bundle_edge_evaluate_and_the_printed_parity_command_score_the_device(exported, tmp_path):
    """Bundle -> `edge evaluate` of the int8 pose model (CPU here; the Edge TPU on a board) -> the parity command the
    bundle printed, run as written: the device's poses scored by the same OKS evaluator and gated like int8's; every
    known client reported by name with why it cannot read the file."""
    import shlex
    import subprocess
    import sys

    from click.testing import CliRunner

    from edge.cli import main as edge_main
    from tests.support.helpers import REPO, quiet_env

    run = tmp_path / "run"
    shutil.copytree(exported[0], run)
    bundle = tmp_path / "bundle"
    result = cli(["parity", str(run), "--bundle", str(bundle)], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = next(line for line in result.stdout.splitlines() if line.startswith("then here: "))[len("then here: "):]
    out = CliRunner().invoke(edge_main, ["evaluate", str(bundle / "model_int8.tflite"), "--data", str(bundle), "--out",
                                         str(tmp_path / "predictions.json")])
    assert out.exit_code == 0, out.output
    document = json.loads((tmp_path / "predictions.json").read_text())
    entries = json.loads((bundle / "bundle.json").read_text())["images"]
    assert document["task"] == "pose" and f"{len(entries)} images" in out.output
    objects = [o for p in document["predictions"] for o in p["objects"]]
    assert objects and all(len(o["keypoints"]) == 7 and all(0 <= v <= 1 for t in o["keypoints"] for v in t[:2])
                           for o in objects)

    env = quiet_env(PYTHONPATH=str(REPO))
    command = shlex.split(printed)
    assert command[:2] == ["pipeline", "parity"] and "--device-results" in command
    done = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, timeout=900, env=env,
                          cwd=tmp_path)
    report = json.loads((run / "parity" / "report.json").read_text())
    models = report["models"]
    # The device decoded the same originals by the same contract through the same model: the same poses.
    for key in ("oks_map50", "oks_map", "box_map50", "agreement"):
        assert models["device_cpu"][key] == pytest.approx(models["int8_cpu"][key], abs=1e-4), key
    assert models["device_cpu"]["device"]["model"] == "model_int8" and not models["device_cpu"]["device"]["edgetpu"]
    assert "device_cpu" in report["gate"]["applies_to"]
    assert done.returncode == (0 if report["gate"]["passed"] else 1), done.stderr[-2000:]
    assert "device_cpu" in done.stdout and "Traceback" not in done.stderr
    assert set(report["clients"]) == CLIENTS and all(c["refused"] and not c["gated"] for c in report["clients"].values())
    assert "client frigate: cannot read model_int8.tflite: Frigate's yolo-generic reader" in done.stdout
    assert "--layout ultralytics" in report["clients"]["ultralytics"]["refused"]  # this run has one class
    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest["parity"]["clients"]) == CLIENTS

    # A document whose objects lack their keypoints, or hold another count of them, is refused naming the result.
    path = tmp_path / "predictions.json"
    first = next(i for i, p in enumerate(document["predictions"]) if p["objects"])
    for change, needle in ((None, f"device result {first} "), (document["predictions"][first]["objects"][0]["keypoints"][:3],
                                                                 "expected 7 [x, y, score] triples")):
        changed = json.loads(json.dumps(document))
        changed["predictions"][first]["objects"][0]["keypoints"] = change
        path.write_text(json.dumps(changed))
        refused = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, timeout=900, env=env,
                                 cwd=tmp_path)
        assert refused.returncode == 1 and needle in refused.stderr and "keypoints" in refused.stderr, refused.stderr[-1500:]
        assert "Traceback" not in refused.stderr


def test_a_gated_client_that_cannot_read_the_pose_file_fails_the_gate_with_its_reason(exported, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(exported[0], run)
    result = cli(["parity", str(run), "--clients", "pycoral", "--max-drop", "100", "--min-accuracy", "0"], timeout=900)
    assert result.returncode == 1, result.stdout[-1500:] + result.stderr[-1500:]
    assert "client_pycoral: cannot feed the model: pycoral's movenet_pose_estimation.py reshapes output 0" in result.stderr
    assert json.loads((run / "parity" / "report.json").read_text())["clients"]["pycoral"]["gated"]


READ_ULTRALYTICS = """
import json, sys
from ultralytics import YOLO
model = YOLO(sys.argv[1], task="pose")
found = []
for path in sys.argv[3:]:
    r = model.predict(path, imgsz=int(sys.argv[2]), conf=0.25, verbose=False)[0]
    found.append({"boxes": r.boxes.xyxy.tolist(), "scores": r.boxes.conf.tolist(), "keypoints": r.keypoints.data.tolist(),
                  "names": r.names})
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def ultralytics_python(tmp_path_factory) -> str:
    import os

    from tests.support.device_env import shared_env

    given = os.environ.get("EDGEFLOW_ULTRALYTICS_PYTHON")
    return given or str(shared_env(tmp_path_factory, "ultralytics-env") / "bin" / "python")


def test_export_layout_ultralytics_writes_the_file_ultralytics_reads(exported, ultralytics_python, tmp_path):
    """`--int8 --layout ultralytics`: model_int8.tflite as always and model_int8_ultralytics.tflite beside it, recorded
    under model_int8's entry, which Ultralytics' own YOLO(file, task="pose") reads as edge reads model_int8.tflite;
    refused without --int8; an int8 export without it takes the stale file away."""
    import subprocess

    from edge.answers.pose import open_pose, poses_file
    from pipeline.tasks.pose.data.heldout import recorded_heldout
    from pipeline.rundir.run import Run
    import zipfile

    from pipeline.rundir.files import sha256_of

    run = tmp_path / "run"
    shutil.copytree(exported[0], run)
    result = cli(["export", str(run), "--int8", "--calibration-samples", "16", "--layout", "ultralytics"], timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    written = run / "model_int8_ultralytics.tflite"
    record = json.loads((run / "manifest.json").read_text())["artifacts"]["model_int8"]["ultralytics"]
    assert record["file"] == written.name and record["sha256"] == sha256_of(written)
    assert record["size_bytes"] == written.stat().st_size and "also wrote model_int8_ultralytics.tflite" in result.stdout
    metadata = json.loads(zipfile.ZipFile(written).read("metadata.json"))  # Ultralytics' own, appended to the flatbuffer
    assert (metadata["task"], metadata["names"], metadata["kpt_shape"]) == ("pose", {"0": "figure"}, [7, 3])

    # Ultralytics' reading of its file against edge's of model_int8.tflite, on the held-out images: each image's best
    # object is edge's best (two int8 files of one model: box and keypoints within 3 px of 64, scores within 0.03);
    # where Ultralytics (conf 0.25) finds none, edge's best scores under 0.28. Measured: within 2.3 px and 0.01.
    images = []
    for n, example in enumerate(recorded_heldout(Run.open(run))):
        images.append(tmp_path / f"{n}.png")
        images[-1].write_bytes(example.image)
    done = subprocess.run([ultralytics_python, "-c", READ_ULTRALYTICS, str(written), "64", *map(str, images)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    model = open_pose(run / "model_int8.tflite")
    found = 0
    for path, theirs in zip(images, read):
        assert theirs["names"] == {"0": "figure"}
        ours = poses_file(model, path, threshold=0.0)
        if not theirs["boxes"]:
            assert not ours or ours[0].score < 0.28
            continue
        found += 1
        best = ours[0]
        assert len(theirs["keypoints"][0]) == 7 and abs(theirs["scores"][0] - best.score) < 0.03
        xy = np.array([best.box.xmin, best.box.ymin, best.box.xmax, best.box.ymax, *(c for p in best.keypoints for c in p[:2])])
        assert np.abs(xy - np.array([*theirs["boxes"][0], *(c for p in theirs["keypoints"][0] for c in p[:2])])).max() < 3.0
    assert found >= len(images) // 2

    refused = cli(["export", str(run), "--layout", "ultralytics"], timeout=300)
    assert refused.returncode == 1 and "--layout ultralytics writes an int8 file; add --int8" in refused.stderr
    assert "Traceback" not in refused.stderr
    again = cli(["export", str(run), "--int8", "--calibration-samples", "16"], timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not written.exists()
    assert "ultralytics" not in json.loads((run / "manifest.json").read_text())["artifacts"]["model_int8"]
