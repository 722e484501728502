"""The anchor-free (YOLO) head against the SSD head: same backbone, input size, data, seed and epochs.

    .venv/bin/python bench/detect/yolo_vs_ssd.py [--epochs N] [--model small_cnn] [--alpha A] [--image-size S]
        [--data shapes|PATH/annotations.json] [--seed N] [--heads ssd,yolo] [--side-by-side] [--out DIR]

Per head, as subprocesses: `pipeline train --task detect --head H --data D` (the task's defaults otherwise), then
`pipeline run --task detect --head H` on that run (export float and int8, pre-flight, parity). Reported: the held-out
mAP@.5 and mAP@[.5:.95] from training's evaluation (per-class NMS, as both heads are scored after training), parity's
float SavedModel and int8 mAP@.5 (each model's own post-processing: the op for SSD, the host decode for YOLO), the
int8 drop, the training command's wall and CPU time and their YOLO / SSD ratios. Targets (issue 40): int8 within
1 pp of float; training time within 1.5x of SSD's. The machine's load is printed before and after: wall times on a
shared machine are the neighbours' too, CPU time less so. With --side-by-side the heads' commands run at the same
time (each takes about one of the two cores), so both see the same load; each command's CPU time is its own
(os.wait4), the fairer ratio on a loaded machine.
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

REPO = Path(__file__).resolve().parents[2]
PIPELINE = str(Path(sys.executable).with_name("pipeline"))


def side_by_side(commands) -> list:
    """Run `commands` at the same time; per command its wall and CPU time (its own process tree's, by wait4)."""
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in commands]
    outputs = [None] * len(procs)
    import threading

    def drain(i):  # read each pipe as it fills, or a chatty command blocks on a full pipe
        outputs[i] = procs[i].stdout.read()

    readers = [threading.Thread(target=drain, args=(i,)) for i in range(len(procs))]
    for r in readers:
        r.start()
    results = [None] * len(procs)
    for _ in procs:
        pid, status, usage = os.wait4(-1, 0)
        i = next(k for k, p in enumerate(procs) if p.pid == pid)
        procs[i].returncode = os.waitstatus_to_exitcode(status)
        results[i] = {"wall_s": round(time.perf_counter() - start, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}
    for r in readers:
        r.join()
    for c, p, out in zip(commands, procs, outputs):
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(c)} failed ({p.returncode}):\n{out[-3000:]}")
    return results


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


def train_command(head: str, run: Path, args) -> list:
    extra = (["--alpha", str(args.alpha)] if args.alpha else []) + (["--image-size", str(args.image_size)] if args.image_size else [])
    return [PIPELINE, "train", "--task", "detect", "--head", head, "--model", args.model, "--data", args.data,
            "--epochs", str(args.epochs), "--seed", str(args.seed), *extra, "--out", str(run)]


def run_command(head: str, run: Path) -> list:
    return [PIPELINE, "run", "--task", "detect", "--head", head, "--out", str(run)]


def run_dir(out: Path, head: str, args) -> Path:
    data = "shapes" if args.data == "shapes" else Path(args.data).parent.name
    return out / f"{data}-{args.model}{args.alpha or ''}-{args.image_size or 'default'}-s{args.seed}-{head}"


def one(head: str, out: Path, args, train=None, whole=None) -> dict:
    run = run_dir(out, head, args)
    train = train or timed(train_command(head, run, args))
    whole = whole or timed(run_command(head, run))
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
    parser.add_argument("--alpha", type=float, default=None, help="mobilenet_v2's width multiplier")
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--side-by-side", action="store_true", help="run the heads' commands at the same time")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load_at_start = os.getloadavg()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    print(f"command: {' '.join(sys.argv)}", flush=True)
    heads = args.heads.split(",")
    if args.side_by_side:
        trains = side_by_side([train_command(h, run_dir(out, h, args), args) for h in heads])
        print(f"trained side by side; load average now {os.getloadavg()[0]:.1f}", flush=True)
        wholes = side_by_side([run_command(h, run_dir(out, h, args)) for h in heads])
    else:
        trains = wholes = [None] * len(heads)
    results = []
    for head, train, whole in zip(heads, trains, wholes):
        result = one(head, out, args, train, whole)
        results.append(result)
        h, p = result["heldout"], result["parity"]
        print(f"{head}: held-out mAP@.5 {h['map50']:.4f} mAP@[.5:.95] {h['map']:.4f}; parity float {p['float_savedmodel']['map50']:.4f} "
              f"int8 {p['int8_cpu']['map50']:.4f} (drop {result['int8_drop_pp']:.2f} pp); train {result['train']['wall_s']} s wall "
              f"{result['train']['cpu_s']} s CPU; load average now {os.getloadavg()[0]:.1f}", flush=True)
    if len(results) == 2:
        a, b = results
        print(f"{b['head']} / {a['head']} training time: wall {b['train']['wall_s'] / a['train']['wall_s']:.2f}x, "
              f"CPU {b['train']['cpu_s'] / a['train']['cpu_s']:.2f}x", flush=True)
    target = out / (run_dir(out, "", args).name.rstrip("-") + ".json")
    target.write_text(json.dumps({"command": sys.argv, "side_by_side": args.side_by_side, "seed": args.seed,
                                  "load_at_start": load_at_start, "load_at_end": os.getloadavg(), "results": results}, indent=1))
    print(f"results in {target}; load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
