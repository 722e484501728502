"""Benchmark of `pipeline import --task detect`: an Ultralytics YOLOv8n built from yolov8n.yaml (no download), trained a
few epochs on `shapes` written in YOLO layout and exported format=onnx by the user's own script (tests/pipeline/tasks/detect/heads/yolo/test_import.py),
then imported with its decoding tail cut and exported --int8 in the YOLO head's layout.

    .venv/bin/python bench/importing/yolo/detect.py --ultralytics-python ULTRA_VENV/bin/python --size 128 --epochs 10 --work DIR
    .venv/bin/python bench/importing/yolo/detect.py --work DIR --reuse      # DIR from an earlier call: its ONNX and data again
    .venv/bin/python bench/importing/yolo/detect.py --work DIR --reuse --val-count 400 --val-seed 2   # a larger --val-data

Reports: the time and peak memory (/usr/bin/time -v) of import and of export --int8, each its own process with
TensorFlow's start; the ops the pre-flight predicts on the Edge TPU; parity's mAP@.5 (COCOeval) of the int8 model
against the reference, onnxruntime on the ONNX file with its own decoded output through host NMS (target: within
1 pp); Frigate's yolo-generic reading of the int8 file against `edge detect`'s objects on the same held-out pixels
(bench/clients/frigate_yolo.py's count: same class, IoU >= 0.9, score >= 0.4). Training is not timed. Then `export --int8
--remedy`: the ladder's choice on the tuning split the import set aside from --val-data, which parity then measures
on the held-out rest.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from bench.importing.classifiers import timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ultralytics-python", help="the side venv's python (.ci/ultralytics-env --make DIR)")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--reuse", action="store_true", help="the data and ONNX file already in --work")
    parser.add_argument("--val-count", type=int, help="with --reuse: write another --val-data of this many shapes images "
                        "(at --size) under --work, instead of the val/ training wrote")
    parser.add_argument("--val-seed", type=int, default=2, help="the seed of --val-count's images (train/ is 0, val/ 1)")
    args = parser.parse_args()
    work = args.work.resolve()
    if not args.reuse:
        from tests.pipeline.tasks.detect.heads.yolo.test_import import train_ultralytics

        made = train_ultralytics(args.ultralytics_python, work, args.size, args.epochs)
    else:
        made = {"train": work / "train" / "data.yaml", "val": work / "val" / "data.yaml",
                "onnx": next((work / "runs" / "train" / "weights").glob("*.onnx"))}
        if args.val_count:
            from tests.pipeline.tasks.detect.heads.yolo.test_import import write_shapes_yolo

            folder = work / f"val{args.val_count}-seed{args.val_seed}"
            shutil.rmtree(folder, ignore_errors=True)
            made["val"] = write_shapes_yolo(folder, args.val_count, args.size, args.val_seed)
    run = work / "run"
    shutil.rmtree(run, ignore_errors=True)
    imported = timed(["import", made["onnx"], "--task", "detect", "--data", made["train"], "--val-data", made["val"], "--out", run])
    exported = timed(["export", run, "--int8"])
    preflight = json.loads(timed(["compile", run, "--check-only", "--json"])["stdout"].strip().splitlines()[-1])
    remedied = timed(["export", run, "--int8", "--remedy"], ok=(0, 1))  # 1: nothing passed, the best attempt kept
    timed(["parity", run], ok=(0, 1))  # 1: the gate failed, which this bench reports
    report = json.loads((run / "parity" / "report.json").read_text())
    frigate = subprocess.run([sys.executable, str(REPO / "bench" / "clients" / "frigate_yolo.py"), str(run)], capture_output=True,
                             text=True, cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    manifest = json.loads((run / "manifest.json").read_text())
    models = report["models"]
    load = os.getloadavg()
    print(f"# pipeline import --task detect: Ultralytics YOLOv8n, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
          f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end\n")
    print(f"command: `{' '.join(sys.argv)}`\n")
    print(f"model: {made['onnx'].name}, input {manifest['model']['image_size']} px, {len(manifest['labels'])} classes; "
          f"{manifest['origin']['cut']}\n")
    print("| stage | seconds | peak MB |\n|---|---|---|")
    for name, t in (("import", imported), ("export --int8", exported), ("export --int8 --remedy", remedied)):
        print(f"| {name} | {t['seconds']:.1f} | {t['peak_mb']:.0f} |")
    print(f"\npre-flight: {preflight['ops_on_edgetpu']}/{preflight['total_ops']} ops on the Edge TPU "
          f"({preflight['percent_on_edgetpu']}%)\n")
    ladder = manifest["remedy"]
    print(f"remedy ladder on {ladder['tuning_split']['images']} tuning images ({ladder['tuning_split']['source']}): "
          f"float mAP@.5 {ladder['reference']['map50']:.4f}; "
          + "; ".join(f"{a['remedy']} " + (f"{a['tuning']['map50']:.4f}" + (" pass" if a["passed"] else " fail") if a["tuning"] else "error") for a in ladder["attempts"])
          + f"; chosen: {ladder['chosen']}\n")
    print(f"parity on {report['images']} held-out images ({report['objects']} objects), COCOeval:\n")
    print("| model | mAP@.5 | mAP@[.5:.95] |\n|---|---|---|")
    for name, m in models.items():
        print(f"| {name} | {m['map50']:.4f} | {m['map']:.4f} |")
    for name, c in report.get("clients", {}).items():
        print(f"| client {name} | " + (f"refused: {c['refused']} | |" if "refused" in c else f"{c['map50']:.4f} | {c['map']:.4f} |"))
    drop = (models["float_savedmodel"]["map50"] - models["int8_cpu"]["map50"]) * 100
    print(f"\nint8 mAP@.5 drop from the reference (onnxruntime, the ONNX file's own decoding): {drop:.2f} pp (target <= 1); "
          f"parity's gate: {'passed' if report['gate']['passed'] else 'failed'}\n")
    print("Frigate's yolo-generic reading of the int8 file against edge detect:\n")
    print("```\n" + (frigate.stdout.strip() or frigate.stderr[-1500:]) + "\n```")


if __name__ == "__main__":
    main()
