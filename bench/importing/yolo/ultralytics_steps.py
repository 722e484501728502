"""The steps of the Ultralytics benchmarks that run inside an Ultralytics venv (make_envs.sh builds both), as a user's
own script would; side_by_side.py and pose.py call them, each its own process. Each prints one JSON line last.

    PY ultralytics_steps.py train WORK --size 192 --epochs 20    # YOLOv8n from yolov8n.yaml -> WORK/runs/train/weights/best.pt, best.onnx
    PY ultralytics_steps.py train WORK --yaml yolov8n-pose.yaml  # the pose model instead (nc and kpt_shape from the data's yaml)
    PY ultralytics_steps.py litert WORK --size 192               # model.export(format="tflite", int8=True)
    PY ultralytics_steps.py edgetpu WORK --size 192              # model.export(format="edgetpu") (the TensorFlow venv)
    PY ultralytics_steps.py val WORK --size 192 --file F [--edgeflow-layout]   # model.val on the held-out images

Calibration (both exports) reads WORK/calibration.yaml, whose `val` split is the training images: Ultralytics
calibrates on a data set's `val` split, and the held-out images are never shown to a calibrator. No weights are
downloaded (a model's yaml); YOLO_OFFLINE=1 is set by the caller.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def train(work: Path, size: int, epochs: int, seed: int, model_yaml: str) -> dict:
    from ultralytics import YOLO

    model = YOLO(model_yaml)  # from its yaml: no weights downloaded
    started = time.time()
    model.train(data=str(work / "ultralytics.yaml"), epochs=epochs, imgsz=size, batch=16, workers=0, device="cpu",
                plots=False, amp=False, val=False, project=str(work / "runs"), name="train", exist_ok=True, seed=seed,
                close_mosaic=max(1, epochs // 3), warmup_epochs=1, verbose=False)
    seconds = time.time() - started
    weights = work / "runs" / "train" / "weights" / "best.pt"
    if not weights.is_file():
        weights = work / "runs" / "train" / "weights" / "last.pt"
    onnx = YOLO(str(weights)).export(format="onnx", imgsz=size, opset=17, simplify=True, dynamic=False)
    return {"weights": str(weights), "onnx": str(onnx), "train_seconds": round(seconds, 1)}


def litert(work: Path, size: int) -> dict:
    from ultralytics import YOLO

    weights = work / "runs" / "train" / "weights" / "best.pt"
    started = time.time()
    out = YOLO(str(weights)).export(format="tflite", int8=True, imgsz=size, data=str(work / "calibration.yaml"), batch=1)
    return {"file": str(out), "seconds": round(time.time() - started, 1)}


def edgetpu(work: Path, size: int) -> dict:
    """`format=edgetpu` as a user calls it. Offline it cannot fetch the Edge TPU compiler, so the export raises at its
    last step; the full-integer int8 file it wrote before that step is what is scored. The error is returned whole.
    Run in its own working folder (where onnx2tf looks for its sample images)."""
    import shutil

    from ultralytics import YOLO

    # A copy of the weights in the working folder: the export writes its own ONNX file (its TensorFlow wrapper's,
    # boxes normalized) beside the weights, where it would replace the `format=onnx` file the import reads.
    weights = Path.cwd() / "best.pt"
    shutil.copyfile(work / "runs" / "train" / "weights" / "best.pt", weights)
    started = time.time()
    error = None
    try:
        out = YOLO(str(weights)).export(format="edgetpu", imgsz=size, data=str(work / "calibration.yaml"), batch=1)
    except BaseException as err:  # noqa: BLE001 -- the failure is the measurement; SystemExit included
        out = None
        error = f"{type(err).__name__}: {err}"
        traceback.print_exc()
    full = sorted(weights.parent.glob("best_saved_model/*_full_integer_quant.tflite"))
    return {"file": str(full[0]) if full else None, "compiled": str(out) if out else None, "error": error,
            "seconds": round(time.time() - started, 1)}


def _edgeflow_layout_forward():
    """A LiteRTBackend.forward for edgeflow's int8 file, which Ultralytics' validator cannot read as it is: its input is
    uint8 camera bytes (the validator quantizes only int8/int16 inputs, from 0..1) and it ends in the two outputs of
    edgeflow's YOLO layout (box distributions, class logits), not Ultralytics' decoded (1, 4 + C, N). The file is fed
    bytes and its outputs decoded by edgeflow's own host decoding (edge/answers/heads/yolo.py: softmax over bins,
    expected distance times stride, sigmoid of the logits) into xywh pixels and scores, every anchor point kept:
    Ultralytics' own NMS and metrics then run on them as on any model."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    from edge.answers.heads import yolo as host

    def forward(self, im):
        pixels = np.clip(np.rint(im.cpu().numpy().transpose(0, 2, 3, 1) * 255.0), 0, 255)
        details = self.input_details[0]
        self.interpreter.set_tensor(details["index"], pixels.astype(details["dtype"]))
        self.interpreter.invoke()
        layout = host.find_layout(self.interpreter)
        dist, logits = layout.read(self.interpreter)
        corners = host.boxes_of(host.dequantized(dist, layout.boxes_q), layout.centres, layout.strides)  # x1y1x2y2
        xywh = np.concatenate([(corners[:, :2] + corners[:, 2:]) / 2, corners[:, 2:] - corners[:, :2]], axis=1)
        scores = 1.0 / (1.0 + np.exp(-host.dequantized(logits, layout.logits_q)))
        return [np.concatenate([xywh, scores], axis=1).T[None].astype(np.float32)]

    return forward


def val(work: Path, size: int, file: str, edgeflow_layout: bool) -> dict:
    from ultralytics import YOLO

    if edgeflow_layout:
        from ultralytics.nn.backends.litert import LiteRTBackend

        LiteRTBackend.forward = _edgeflow_layout_forward()
    model = YOLO(file, task="detect")
    started = time.time()
    metrics = model.val(data=str(work / "ultralytics.yaml"), imgsz=size, batch=1, device="cpu", plots=False,
                        project=str(work / "val"), name=Path(file).stem, exist_ok=True, verbose=False, workers=0)
    return {"file": file, "map": float(metrics.box.map), "map50": float(metrics.box.map50),
            "seconds": round(time.time() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("train", "litert", "edgetpu", "val"))
    parser.add_argument("work", type=Path)
    parser.add_argument("--size", type=int, default=192)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="Ultralytics' training seed")
    parser.add_argument("--yaml", default="yolov8n.yaml", help="the model Ultralytics builds and trains")
    parser.add_argument("--file")
    parser.add_argument("--edgeflow-layout", action="store_true")
    args = parser.parse_args()
    work = args.work.resolve()
    if args.step == "train":
        result = train(work, args.size, args.epochs, args.seed, args.yaml)
    elif args.step == "litert":
        result = litert(work, args.size)
    elif args.step == "edgetpu":
        result = edgetpu(work, args.size)
    else:
        result = val(work, args.size, args.file, args.edgeflow_layout)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
