"""Three paths from one Ultralytics YOLOv8n to a full-integer int8 file for the Coral, scored side by side on the same
held-out images by both evaluators.

    bash bench/importing/yolo/make_envs.sh                      # /work/envs/ultralytics, /work/envs/ultralytics-edgetpu
    .venv/bin/python bench/importing/yolo/side_by_side.py --work DIR [--size 192 --epochs 20 --train-count 400
        --heldout-count 300] [--ultralytics-python P --edgetpu-python P] [--write]

The model: YOLOv8n from `yolov8n.yaml` (no weights downloaded), trained by Ultralytics on bench/detect/photo_scenes.py's
real-photo scenes (four classes) at SIZE x SIZE, written in Ultralytics' YOLO layout; the held-out scenes (another
seed) are never trained or calibrated on. The paths:

- (a) Ultralytics' `format=edgetpu` (TensorFlow 2.19 + onnx2tf, in the second venv): offline it cannot fetch the Edge
  TPU compiler, so the full-integer int8 file it writes before the compile step is taken. It is run twice: as a user
  runs it (the error recorded), then with onnx2tf's sample-image file supplied in its working folder, made from 20 of
  the training images (128x128, 0..1: what `pipeline import` supplies too).
- (b) Ultralytics' `format=tflite int8=True` (litert-torch + ai-edge-quantizer).
- (c) `pipeline import` of the same model's `format=onnx` file (`--val-data` the held-out images, `--tuning-fraction 0`
  so all of them are held out), then `pipeline export --int8` and `pipeline parity`.

Every file is scored on the held-out images by edgeflow's COCOeval (pycocotools; the host decoding's rules: one class
per box, score >= 0.05, class-agnostic NMS at IoU 0.6, the best 25; (c) and the float ONNX are parity's own rows) and
by Ultralytics' validator (`model.val`, its own conf 0.001, NMS IoU 0.7, 300 detections; edgeflow's file through the
adapter in ultralytics_steps.py, since the validator cannot read its layout). The pre-flight (`pipeline compile FILE
--check-only --json`) maps each file's ops. Each step's answer is kept in DIR/steps/*.json and not run again (`--redo
STEP` runs one again). `--write` writes bench/results/ultralytics_side_by_side.md, keeping what follows its notes marker.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

STEPS = Path(__file__).with_name("ultralytics_steps.py")
RESULTS = REPO / "bench" / "results" / "ultralytics_side_by_side.md"
MARKER = "<!-- notes by hand: side_by_side.py --write keeps everything below this line -->"


def env() -> dict:
    return {**os.environ, "YOLO_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO)}


class Steps:
    """Each step's JSON answer, kept in WORK/steps/ so a rerun goes on where the last one stopped."""

    def __init__(self, work: Path, redo):
        self.folder = work / "steps"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.redo = set(redo or ())

    def __call__(self, name: str, make):
        path = self.folder / f"{name}.json"
        if path.is_file() and name not in self.redo:
            return json.loads(path.read_text())
        print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {name} ...", flush=True)
        started = time.time()
        answer = make()
        answer.setdefault("wall_seconds", round(time.time() - started, 1))
        path.write_text(json.dumps(answer, indent=1))
        return answer


def run_logged(cmd, log: Path, cwd: Path, ok=(0,)) -> subprocess.CompletedProcess:
    with open(log, "w") as out:
        done = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=out, text=True, cwd=cwd, env=env())
    if done.returncode not in ok:
        sys.exit(f"{shlex.join(map(str, cmd))} exited {done.returncode}; see {log}:\n{log.read_text()[-3000:]}")
    return done


def last_json(done: subprocess.CompletedProcess) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_yolo(root: Path, source) -> Path:
    """A DetSource in Ultralytics' layout: images/, labels/ and a data.yaml naming the classes (what edgeflow reads)."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(exist_ok=True)
    (root / "data.yaml").write_text("names: [" + ", ".join(source.labels) + "]\n")
    for e in source.examples:
        name = Path(e.id).name
        (root / "images" / name).write_bytes(e.image)
        lines = [f"{c} {(x0 + x1) / 2:.6f} {(y0 + y1) / 2:.6f} {x1 - x0:.6f} {y1 - y0:.6f}"
                 for (y0, x0, y1, x1), c in zip(e.boxes, e.classes)]
        (root / "labels" / (Path(name).stem + ".txt")).write_text("".join(line + "\n" for line in lines))
    return root / "data.yaml"


def make_data(work: Path, size: int, train_count: int, heldout_count: int) -> dict:
    from PIL import Image

    from bench.detect.photo_scenes import scenes
    from bench.importing.yolo.ultralytics_files import write_onnx2tf_sample

    train = scenes(train_count, (size, size), seed=0)
    heldout = scenes(heldout_count, (size, size), seed=1)
    names = ", ".join(train.labels)
    write_yolo(work / "train", train)
    write_yolo(work / "heldout", heldout)
    (work / "ultralytics.yaml").write_text(f"path: {work}\ntrain: train/images\nval: heldout/images\nnames: [{names}]\n")
    # Ultralytics calibrates an int8 export on the data set's `val` split: here the training images.
    (work / "calibration.yaml").write_text(f"path: {work}\ntrain: train/images\nval: train/images\nnames: [{names}]\n")
    write_onnx2tf_sample(work / "edgetpu", (Image.open(io.BytesIO(e.image)) for e in train.examples[:20]))
    (work / "edgetpu-as-is").mkdir(exist_ok=True)
    return {"train": train_count, "heldout": heldout_count, "labels": train.labels,
            "train_objects": sum(len(e.classes) for e in train.examples),
            "heldout_objects": sum(len(e.classes) for e in heldout.examples)}


def pipeline(args, log: Path, ok=(0,)) -> subprocess.CompletedProcess:
    return run_logged([sys.executable, "-m", "pipeline", *args], log, REPO, ok)


def file_types(path: Path) -> dict:
    """Input and output tensors of a .tflite file: dtype and shape."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(str(path))
    describe = lambda d: f"{np.dtype(d['dtype']).name} {list(int(x) for x in d['shape'])}"  # noqa: E731
    return {"inputs": [describe(d) for d in interpreter.get_input_details()],
            "outputs": [describe(d) for d in interpreter.get_output_details()]}


def ultralytics_file_detections(path: Path, images) -> list:
    """An Ultralytics .tflite file's objects on uint8 pixels [S, S, 3], read as Ultralytics' LiteRT backend reads it
    (ultralytics_files.raw_output; xywh normalized to the input, so scaled by its size), then kept by the host
    decoding's rules (pipeline/tasks/detect/heads/yolo/reference.py's `kept`: one class per box, score >= 0.05,
    class-agnostic NMS, the best 25), as the detect task's Detections."""
    from ai_edge_litert.interpreter import Interpreter

    from bench.importing.yolo.ultralytics_files import raw_output
    from pipeline.tasks.detect.evaluate import Detections
    from pipeline.tasks.detect.heads.yolo.reference import kept

    interpreter = Interpreter(str(path))
    interpreter.allocate_tensors()
    found = []
    for image in images:
        y = raw_output(interpreter, image).T  # [N, 4 + C]
        height, width = image.shape[:2]
        y[:, [0, 2]] *= width
        y[:, [1, 3]] *= height
        boxes, classes, scores, _ = kept(y, y.shape[1] - 4, width, height)
        found.append(Detections(boxes, classes, scores))
    return found


def coco_score(path: Path, heldout_yaml: Path) -> dict:
    from PIL import Image

    from pipeline.tasks.detect.data.yolo import read_yolo
    from pipeline.tasks.detect.evaluate import evaluate

    source = read_yolo(heldout_yaml)
    images = [np.asarray(Image.open(io.BytesIO(e.image)).convert("RGB")) for e in source.examples]
    scores = evaluate(source.examples, ultralytics_file_detections(path, images), source.labels)
    return {"map": scores.map, "map50": scores.map50, "images": len(images)}


def preflight(path: Path, log: Path) -> dict:
    done = pipeline(["compile", path, "--check-only", "--json"], log)
    report = last_json(done)
    from collections import Counter

    cpu = Counter(o["op"] for o in report.get("ops", []) if not o.get("on_edgetpu"))
    return {k: report.get(k) for k in ("ops_on_edgetpu", "total_ops", "percent_on_edgetpu", "ops_on_cpu")} | {
        "cpu_ops": [f"{n} {op}" for op, n in sorted(cpu.items())],
        "usb3_ms": (report.get("cost") or {}).get("devices", {}).get("usb3", {}).get("total_ms")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--ultralytics-python", default="/work/envs/ultralytics/bin/python")
    parser.add_argument("--edgetpu-python", default="/work/envs/ultralytics-edgetpu/bin/python")
    parser.add_argument("--size", type=int, default=192)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--train-count", type=int, default=400)
    parser.add_argument("--train-seed", type=int, default=0, help="Ultralytics' training seed (the scenes stay seeds 0 and 1)")
    parser.add_argument("--heldout-count", type=int, default=300)
    parser.add_argument("--redo", action="append", help="a step to run again (its name in WORK/steps/)")
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.relative_to(REPO)}")
    args = parser.parse_args()
    work = args.work.resolve()
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    step = Steps(work, args.redo)
    ultra, tpu, size = args.ultralytics_python, args.edgetpu_python, str(args.size)

    data = step("data", lambda: make_data(work, args.size, args.train_count, args.heldout_count))
    trained = step("train", lambda: last_json(run_logged([ultra, STEPS, "train", work, "--size", size, "--epochs",
                                                          str(args.epochs), "--seed", str(args.train_seed)], logs / "train.log", work)))
    litert = step("litert", lambda: last_json(run_logged([ultra, STEPS, "litert", work, "--size", size], logs / "litert.log", work)))

    def edgetpu(folder: str):
        done = run_logged([tpu, STEPS, "edgetpu", work, "--size", size], logs / f"{folder}.log", work / folder)
        answer = last_json(done)
        if answer["file"]:  # the next export of the same weights deletes the folder: keep this one's file
            kept = work / folder / Path(answer["file"]).name
            kept.write_bytes(Path(answer["file"]).read_bytes())
            answer["file"] = str(kept)
        answer["log_tail"] = [line for line in (logs / f"{folder}.log").read_text().splitlines() if line.strip()][-12:]
        return answer

    as_is = step("edgetpu-as-is", lambda: edgetpu("edgetpu-as-is"))
    tpu_export = step("edgetpu", lambda: edgetpu("edgetpu"))
    versions = step("versions", lambda: {
        "ultralytics venv": subprocess.run([ultra, "-c", "import ultralytics, torch, litert_torch, ai_edge_quantizer; from importlib.metadata import version as v; "
                                            "print(f'ultralytics {ultralytics.__version__}, torch {torch.__version__}, litert-torch {v(\"litert-torch\")}, ai-edge-quantizer {v(\"ai-edge-quantizer\")}')"],
                                           capture_output=True, text=True, env=env()).stdout.strip(),
        "edgetpu venv": subprocess.run([tpu, "-c", "import ultralytics, torch, tensorflow as tf, onnx2tf, numpy, onnx; "
                                        "print(f'ultralytics {ultralytics.__version__}, torch {torch.__version__}, tensorflow {tf.__version__}, onnx2tf {onnx2tf.__version__}, numpy {numpy.__version__}, onnx {onnx.__version__}')"],
                                       capture_output=True, text=True, env=env()).stdout.strip(),
        "host": subprocess.run([sys.executable, "-c", "import tensorflow as tf, onnx2tf; print(f'tensorflow {tf.__version__}, onnx2tf {onnx2tf.__version__}')"],
                               capture_output=True, text=True, env=env()).stdout.strip()})

    run = work / "run"

    def edgeflow():
        import shutil

        shutil.rmtree(run, ignore_errors=True)
        t0 = time.time()
        pipeline(["import", trained["onnx"], "--task", "detect", "--data", work / "train" / "data.yaml", "--val-data",
                  work / "heldout" / "data.yaml", "--tuning-fraction", "0", "--out", run], logs / "import.log")
        t1 = time.time()
        pipeline(["export", run, "--int8"], logs / "export.log")
        t2 = time.time()
        pipeline(["parity", run], logs / "parity.log", ok=(0, 1))  # 1: its gate failed, which the table shows
        report = json.loads((run / "parity" / "report.json").read_text())
        return {"file": str(run / "model_int8.tflite"), "import_seconds": round(t1 - t0, 1), "export_seconds": round(t2 - t1, 1),
                "parity": {k: {m: v[m] for m in ("map", "map50")} for k, v in report["models"].items()},
                "images": report["images"], "objects": report.get("objects"), "gate": report["gate"]["passed"],
                "reference_model": report.get("reference_model")}

    imported = step("edgeflow", edgeflow)

    files = {"edgetpu": tpu_export["file"], "litert": litert["file"], "edgeflow": imported["file"]}
    heldout_yaml = work / "heldout" / "data.yaml"
    types = step("types", lambda: {k: file_types(Path(f)) for k, f in files.items() if f})
    mapped = step("preflight", lambda: {k: preflight(Path(f), logs / f"preflight-{k}.log") for k, f in files.items() if f})
    coco = step("coco", lambda: {k: coco_score(Path(files[k]), heldout_yaml) for k in ("edgetpu", "litert") if files[k]})

    def ultralytics_val():
        answers = {}
        for name, f, extra in (("pt", trained["weights"], []), ("onnx", trained["onnx"], []),
                               ("edgetpu", files["edgetpu"], []), ("litert", files["litert"], []),
                               ("edgeflow", files["edgeflow"], ["--edgeflow-layout"])):
            if f:
                answers[name] = last_json(run_logged([ultra, STEPS, "val", work, "--size", size, "--file", f, *extra],
                                                     logs / f"val-{name}.log", work))
        return answers

    validated = step("val", ultralytics_val)
    table = render(args, data, trained, litert, as_is, tpu_export, imported, types, mapped, coco, validated, versions)
    print(table)
    if args.write:
        notes = RESULTS.read_text().split(MARKER, 1)[1] if RESULTS.is_file() and MARKER in RESULTS.read_text() else "\n"
        RESULTS.write_text(table + "\n" + MARKER + notes)


def render(args, data, trained, litert, as_is, tpu_export, imported, types, mapped, coco, validated, versions) -> str:
    parity = imported["parity"]
    float_coco = parity["float_savedmodel"]
    float_val = validated["onnx"]
    rows = [("(a) Ultralytics `format=edgetpu`, the int8 file before the compile step", "edgetpu", coco.get("edgetpu")),
            ("(b) Ultralytics `format=tflite int8=True` (LiteRT)", "litert", coco.get("litert")),
            ("(c) edgeflow `pipeline import` + `export --int8`", "edgeflow", parity["int8_cpu"])]
    load = os.getloadavg()
    out = [f"# Ultralytics' own Edge TPU and LiteRT exports against `pipeline import`: one YOLOv8n, side by side\n",
           f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, {os.cpu_count()} cores, "
           f"Python {platform.python_version()}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end "
           "(other helpers' jobs ran beside it)\n",
           "command (from the repository's root, after `bash bench/importing/yolo/make_envs.sh`):\n",
           "```\n" + " ".join(["python", *map(str, [Path(sys.argv[0]).resolve().relative_to(REPO), *sys.argv[1:]])]) + "\n```\n",
           f"Model: YOLOv8n from `yolov8n.yaml`, trained by Ultralytics (seed {args.train_seed}) {args.epochs} epochs at {args.size} px on "
           f"{data['train']} real-photo scenes ({data['train_objects']} objects; bench/detect/photo_scenes.py at {args.size}x{args.size}, "
           f"seed 0, classes {', '.join(data['labels'])}), training {trained['train_seconds']:.0f} s. Held out: "
           f"{data['heldout']} scenes of seed 1 ({data['heldout_objects']} objects), never trained or calibrated on; "
           "every row below is scored on all of them. Calibration: the training images for every path.\n",
           "Environments: " + "; ".join(f"{k}: {v}" for k, v in versions.items() if k != "wall_seconds") + "\n",
           "| path | file | input | outputs | ops mapped (pre-flight) | edgeflow COCOeval mAP@[.5:.95] / mAP@.5 | "
           "int8 loss pp | Ultralytics val mAP@[.5:.95] / mAP@.5 | int8 loss pp |",
           "|---|---|---|---|---|---|---|---|---|",
           f"| float original | `{Path(trained['onnx']).name}` (onnxruntime; `.pt` in Ultralytics val: "
           f"{validated['pt']['map']:.4f} / {validated['pt']['map50']:.4f}) | float32 | float32 | | "
           f"{float_coco['map']:.4f} / {float_coco['map50']:.4f} | | {float_val['map']:.4f} / {float_val['map50']:.4f} | |"]
    for label, key, scores in rows:
        if key not in types:
            out.append(f"| {label} | not made | | | | | | | |")
            continue
        t, m, v = types[key], mapped[key], validated.get(key)
        ef = f"{scores['map']:.4f} / {scores['map50']:.4f}"
        ef_loss = f"{(float_coco['map'] - scores['map']) * 100:.2f} / {(float_coco['map50'] - scores['map50']) * 100:.2f}"
        uv = f"{v['map']:.4f} / {v['map50']:.4f}" if v else "not run"
        uv_loss = f"{(float_val['map'] - v['map']) * 100:.2f} / {(float_val['map50'] - v['map50']) * 100:.2f}" if v else ""
        cpu = f" (CPU: {', '.join(m['cpu_ops'])})" if m.get("cpu_ops") else ""
        out.append(f"| {label} | `{Path(files_name(key, tpu_export, litert, imported)).name}` | {'; '.join(t['inputs'])} | "
                   f"{'; '.join(t['outputs'])} | {m['ops_on_edgetpu']}/{m['total_ops']}{cpu} | {ef} | {ef_loss} | {uv} | {uv_loss} |")
    out.append("\nint8 loss: the float original's score minus the file's, in percentage points of mAP@[.5:.95] / mAP@.5, "
               "each evaluator against its own reading of the float ONNX file.\n")
    out.append(f"`format=edgetpu` as a user runs it offline: {as_is.get('error') or 'no error'}\n")
    out.append(f"`format=edgetpu` with onnx2tf's sample file supplied: {tpu_export.get('error') or 'no error'}\n")
    out.append(f"Times: LiteRT export {litert['seconds']:.0f} s; `format=edgetpu` {tpu_export['seconds']:.0f} s (to its "
               f"failure at the compile step); `pipeline import` {imported['import_seconds']:.0f} s, `export --int8` "
               f"{imported['export_seconds']:.0f} s. Parity's gate on the imported run: "
               f"{'passed' if imported['gate'] else 'failed'}.\n")
    return "\n".join(out)


def files_name(key, tpu_export, litert, imported) -> str:
    return {"edgetpu": tpu_export["file"], "litert": litert["file"], "edgeflow": imported["file"]}[key]


if __name__ == "__main__":
    main()
