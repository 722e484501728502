"""Benchmark of `pipeline import --task pose` beside Ultralytics' own Edge TPU export of the same model: a YOLOv8n-pose
built from yolov8n-pose.yaml (no download), trained by Ultralytics on `figures` written in YOLO-pose layout
(tests/pipeline/tasks/pose/heads/yolo/test_import.py writes it), exported format=onnx, then

- edgeflow: `pipeline import best.onnx --task pose`, `export --int8`, `compile --check-only --json` (ops mapped) and
  `parity` (OKS mAP of float and int8 against the reference, onnxruntime on the ONNX file with its own decoding);
- Ultralytics: `model.export(format="edgetpu")` in a TensorFlow venv (bench/importing/yolo/make_envs.sh on
  branch h55-bench builds one); offline it cannot fetch edgetpu_compiler, so its full-integer int8 file is what is
  measured: the pre-flight's ops mapped, and OKS mAP on the same held-out images (the run's recorded ones, stretched to
  the input as parity feeds them), read here from its one decoded output (1, 4 + C + 3K, N), coordinates normalized,
  and kept by the same host rules (one class per point, score filter, class-agnostic NMS, best 25).

    /work/venv/bin/python bench/importing/yolo/pose.py --work DIR --ultralytics-python U/bin/python \
        --edgetpu-python E/bin/python --size 128 --epochs 30
    ... --work DIR --reuse          # DIR's trained model and data again

Prints one JSON object; bench/results/pose_import.md records a run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
STEPS = Path(__file__).with_name("ultralytics_steps.py")


def _run(args, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "YOLO_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env={**env, **kw.pop("env", {})}, **kw)
    return done


def _last_json(done: subprocess.CompletedProcess, what: str) -> dict:
    if done.returncode != 0 and not done.stdout.strip():
        raise SystemExit(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def prepare(work: Path, size: int, train_count: int, val_count: int) -> None:
    import yaml
    from PIL import Image

    from bench.importing.yolo.ultralytics_files import write_onnx2tf_sample
    from tests.pipeline.tasks.pose.heads.yolo.test_import import write_figures_yolo_pose

    train = write_figures_yolo_pose(work / "train", train_count, size, 0)
    write_figures_yolo_pose(work / "val", val_count, size, 1)
    doc = yaml.safe_load(train.read_text())
    common = {"path": str(work.resolve()), "names": doc["names"], "kpt_shape": doc["kpt_shape"], "flip_idx": doc["flip_idx"]}
    (work / "ultralytics.yaml").write_text(yaml.safe_dump({**common, "train": "train/images", "val": "val/images"}))
    # Ultralytics calibrates on a data set's `val` split: the training images here, never the held-out ones.
    (work / "calibration.yaml").write_text(yaml.safe_dump({**common, "train": "train/images", "val": "train/images"}))
    # onnx2tf's sample, which it would download, from 20 training images in the Edge TPU export's working folder.
    write_onnx2tf_sample(work / "edgetpu", (Image.open(p) for p in sorted((work / "train" / "images").glob("*.png"))[:20]))


def preflight(target: Path) -> dict:
    done = _run([sys.executable, "-m", "pipeline", "compile", target, "--check-only", "--json"])
    found = _last_json(done, f"compile --check-only {target}")
    return {k: found.get(k) for k in ("ops_total", "ops_on_edgetpu", "ops_on_cpu", "percent_on_edgetpu", "cpu_ops") if k in found} or found


def ultralytics_int8_poses(path: Path, pixels, num_classes: int) -> list:
    """Ultralytics' int8 .tflite on uint8 pixels [S, S, 3], read as its LiteRT backend reads it
    (ultralytics_files.raw_output): (4 + C + 3K, N) with coordinates normalized to the input, kept by the host rules."""
    from bench.importing.yolo.ultralytics_files import raw_output
    from edge.model.interpreter import make_interpreter
    from pipeline.tasks.pose.heads.yolo.import_reference import poses_of_rows

    interpreter = make_interpreter(path.read_bytes(), edgetpu=False)
    interpreter.allocate_tensors()
    return [poses_of_rows(raw_output(interpreter, image).T, num_classes, 1.0, 1.0) for image in pixels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--ultralytics-python", default="/work/envs/ultra/bin/python")
    parser.add_argument("--edgetpu-python", help="a venv where Ultralytics' format=edgetpu export runs (TensorFlow)")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--train-count", type=int, default=256)
    parser.add_argument("--val-count", type=int, default=64)
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    work = args.work.resolve()
    result = {"size": args.size, "epochs": args.epochs}
    if not args.reuse:
        work.mkdir(parents=True, exist_ok=False)
        prepare(work, args.size, args.train_count, args.val_count)
        trained = _last_json(_run([args.ultralytics_python, STEPS, "train", work, "--size", args.size, "--epochs", args.epochs,
                                   "--yaml", "yolov8n-pose.yaml"],
                                  cwd=work, env={"YOLO_CONFIG_DIR": str(work / "settings")}), "Ultralytics training")
        (work / "trained.json").write_text(json.dumps(trained))
    trained = json.loads((work / "trained.json").read_text())
    result["train_seconds"] = trained["train_seconds"]
    run = work / "run"
    started = time.time()
    for step in (["import", trained["onnx"], "--task", "pose", "--data", work / "train" / "data.yaml", "--val-data",
                  work / "val" / "data.yaml", "--out", run], ["export", run, "--int8"], ["export", run]):
        if step[0] == "import" and run.exists():
            continue
        done = _run([sys.executable, "-m", "pipeline", *step])
        if done.returncode:
            raise SystemExit(f"pipeline {' '.join(map(str, step))} failed:\n{done.stderr[-3000:]}")
    result["edgeflow_seconds"] = round(time.time() - started, 1)
    result["edgeflow_preflight"] = preflight(run)
    _run([sys.executable, "-m", "pipeline", "parity", run])  # its gate may fail: the rows are the measurement
    report = json.loads((run / "parity" / "report.json").read_text())
    pick = ("oks_map", "oks_map50", "box_map50")
    result["edgeflow"] = {m: {k: report["models"][m][k] for k in pick} for m in report["models"]}
    result["edgeflow"]["reference"] = report["reference"] + " (onnxruntime on the original ONNX, its own decoding)"
    result["images"], result["objects"] = report["images"], report["objects"]
    if args.edgetpu_python:
        folder = work / "edgetpu"
        folder.mkdir(exist_ok=True)
        if not (folder / "result.json").exists():
            done = _run([args.edgetpu_python, STEPS, "edgetpu", work, "--size", args.size], cwd=folder,
                        env={"YOLO_CONFIG_DIR": str(work / "settings")})
            (folder / "result.json").write_text(json.dumps(_last_json(done, "Ultralytics' edgetpu export")))
        theirs = json.loads((folder / "result.json").read_text())
        result["ultralytics_edgetpu"] = {"error": theirs["error"], "file": theirs["file"]}
        if theirs["file"]:
            result["ultralytics_edgetpu"]["preflight"] = preflight(Path(theirs["file"]))
            result["ultralytics_edgetpu"].update(_score_theirs(run, Path(theirs["file"])))
    print(json.dumps(result, indent=1))


def _score_theirs(run_dir: Path, path: Path) -> dict:
    from pipeline.rundir.run import Run
    from pipeline.tasks.pose.data.heldout import recorded_heldout, run_layout
    from pipeline.tasks.pose.scores import evaluate

    run = Run.open(run_dir)
    examples = recorded_heldout(run)
    size = (run.image_size, run.image_size)
    pixels = [run.contract.load_pixels(e.image, size, name=e.id) for e in examples]
    found = evaluate(examples, ultralytics_int8_poses(path, pixels, len(run.labels)), run.labels, run_layout(run))
    return {"oks_map": found.oks_map, "oks_map50": found.oks_map50, "box_map50": found.box_map50}


if __name__ == "__main__":
    main()
