"""The pose benchmark's steps that run inside an Ultralytics venv, as a user's own script would; bench_pose_import.py
calls each in its own process, and each prints one JSON line last.

    PY ultralytics_steps.py train WORK --size 128 --epochs 30   # YOLOv8n-pose from its yaml -> best.pt, best.onnx
    PY ultralytics_steps.py edgetpu WORK --size 128             # model.export(format="edgetpu") (a TensorFlow venv)

WORK/ultralytics.yaml names the data (figures in YOLO-pose layout); the Edge TPU export calibrates on
WORK/calibration.yaml, whose `val` split is the training images (the held-out ones are never shown to a calibrator).
No weights are downloaded (`yolov8n-pose.yaml`); the caller sets YOLO_OFFLINE=1.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
import traceback
from pathlib import Path


def train(work: Path, size: int, epochs: int) -> dict:
    from ultralytics import YOLO

    model = YOLO("yolov8n-pose.yaml")  # nc and kpt_shape from the data's yaml
    started = time.time()
    model.train(data=str(work / "ultralytics.yaml"), epochs=epochs, imgsz=size, batch=16, workers=0, device="cpu",
                plots=False, amp=False, val=False, project=str(work / "runs"), name="train", exist_ok=True, seed=0,
                close_mosaic=max(1, epochs // 3), warmup_epochs=1, verbose=False)
    seconds = time.time() - started
    weights = work / "runs" / "train" / "weights" / "best.pt"
    if not weights.is_file():
        weights = weights.with_name("last.pt")
    onnx = YOLO(str(weights)).export(format="onnx", imgsz=size, opset=17, simplify=True, dynamic=False)
    return {"weights": str(weights), "onnx": str(onnx), "train_seconds": round(seconds, 1)}


def edgetpu(work: Path, size: int) -> dict:
    """`format=edgetpu` as a user calls it, in its own working folder (a copy of the weights there: the export writes its
    own ONNX beside them). Offline the Edge TPU compiler cannot be fetched, so the export raises at its last step; the
    full-integer int8 file it wrote before that is what is scored, and the error is returned whole."""
    from ultralytics import YOLO

    weights = Path.cwd() / "best.pt"
    shutil.copyfile(work / "runs" / "train" / "weights" / "best.pt", weights)
    started, error, out = time.time(), None, None
    try:
        out = YOLO(str(weights)).export(format="edgetpu", imgsz=size, data=str(work / "calibration.yaml"), batch=1)
    except BaseException as err:  # noqa: BLE001 -- the failure is part of the measurement; SystemExit included
        error = f"{type(err).__name__}: {err}"
        traceback.print_exc()
    full = sorted(weights.parent.glob("best_saved_model/*_full_integer_quant.tflite"))
    return {"file": str(full[0]) if full else None, "compiled": str(out) if out else None, "error": error,
            "seconds": round(time.time() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("train", "edgetpu"))
    parser.add_argument("work", type=Path)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    work = args.work.resolve()
    result = train(work, args.size, args.epochs) if args.step == "train" else edgetpu(work, args.size)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
