"""The anchor-free (YOLO) head against the SSD head on `shapes`: same backbone, input size, data and epochs.

    .venv/bin/python bench/bench_yolo_vs_ssd.py [--epochs N] [--model small_cnn] [--heads ssd,yolo] [--out DIR]

Per head, as subprocesses: `pipeline train --task detect --head H --data shapes` (the task's defaults otherwise), then
`pipeline run --task detect --head H` on that run (export float and int8, pre-flight, parity). Reported: the held-out
mAP@.5 and mAP@[.5:.95] from training's evaluation (per-class NMS, as both heads are scored after training), parity's
float SavedModel and int8 mAP@.5 (each model's own post-processing: the op for SSD, the host decode for YOLO), the
int8 drop, the training command's wall and CPU time and their YOLO / SSD ratios. Targets (issue 40): int8 within
1 pp of float; training time within 1.5x of SSD's. The machine's load is printed before and after: wall times on a
shared machine are the neighbours' too, CPU time less so.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIPELINE = str(Path(sys.executable).with_name("pipeline"))


def timed(command) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {"wall_s": round(wall, 1), "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
            "stdout": done.stdout}


def one(head: str, out: Path, model: str, epochs: int, data: str) -> dict:
    run = out / f"shapes-{model}-{head}"
    train = timed([PIPELINE, "train", "--task", "detect", "--head", head, "--model", model, "--data", data,
                   "--epochs", str(epochs), "--out", str(run)])
    whole = timed([PIPELINE, "run", "--task", "detect", "--head", head, "--out", str(run)])
    manifest = json.loads((run / "manifest.json").read_text())
    parity = manifest["parity"]
    return {"head": head, "run": str(run), "train": {k: train[k] for k in ("wall_s", "cpu_s")},
            "export_and_parity": {k: whole[k] for k in ("wall_s", "cpu_s")},
            "parameters": manifest["model"]["parameters"], "image_size": manifest["model"]["image_size"],
            "heldout": manifest["metrics"]["heldout"],
            "parity": {name: parity[name] for name in ("float_savedmodel", "float_tflite_cpu", "int8_cpu")},
            "clients": parity["clients"],
            "int8_drop_pp": round((parity["float_savedmodel"]["map50"] - parity["int8_cpu"]["map50"]) * 100, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--heads", default="ssd,yolo")
    parser.add_argument("--data", default="shapes")
    parser.add_argument("--out", default="/tmp/bench_yolo_vs_ssd")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    results = []
    for head in args.heads.split(","):
        result = one(head, out, args.model, args.epochs, args.data)
        results.append(result)
        h, p = result["heldout"], result["parity"]
        print(f"{head}: held-out mAP@.5 {h['map50']:.4f} mAP@[.5:.95] {h['map']:.4f}; parity float {p['float_savedmodel']['map50']:.4f} "
              f"int8 {p['int8_cpu']['map50']:.4f} (drop {result['int8_drop_pp']:.2f} pp); train {result['train']['wall_s']} s wall "
              f"{result['train']['cpu_s']} s CPU; load average now {os.getloadavg()[0]:.1f}", flush=True)
    if len(results) == 2:
        a, b = results
        print(f"{b['head']} / {a['head']} training time: wall {b['train']['wall_s'] / a['train']['wall_s']:.2f}x, "
              f"CPU {b['train']['cpu_s'] / a['train']['cpu_s']:.2f}x", flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"results in {out / 'results.json'}")


if __name__ == "__main__":
    main()
