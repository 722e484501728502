"""Time of the pre-flight on one .tflite file: the whole command a user runs, and the analysis alone.

    python bench/export/check_only.py MODEL.tflite [--runs 5] [--repo DIR]

`--repo` runs another checkout's code (an older commit unpacked with `git archive`), for a before/after comparison
on the same machine in the same minutes. Prints, per run, the wall and CPU seconds of
`python -m pipeline compile MODEL --check-only` and of `preflight.analyze(MODEL)` in one process, then the medians.
Results: bench/results/check_only.md.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANALYZE = """
import sys, time
t0, c0 = time.perf_counter(), time.process_time()
from pipeline.edgetpu import preflight
p = preflight.analyze(sys.argv[1])
print(time.perf_counter() - t0, time.process_time() - c0, len(p.rows), p.ops_on_edgetpu)
"""


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose code runs (default: this one)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.repo), "TF_CPP_MIN_LOG_LEVEL": "3"}
    walls, cpus, analyze_walls, analyze_cpus = [], [], [], []
    for run in range(args.runs):
        before_cpu, start = _child_cpu(), time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pipeline", "compile", str(args.model.resolve()), "--check-only"],
                              cwd=args.repo, env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        cpus.append(_child_cpu() - before_cpu)
        if done.returncode != 0:
            sys.exit(f"the command failed (exit {done.returncode}): {done.stderr[-800:]}")
        inner = subprocess.run([sys.executable, "-c", ANALYZE, str(args.model.resolve())], cwd=args.repo, env=env,
                               capture_output=True, text=True, check=True).stdout.split()
        analyze_walls.append(float(inner[0]))
        analyze_cpus.append(float(inner[1]))
        print(f"run {run}: command {walls[-1]:.2f} s wall, {cpus[-1]:.2f} s CPU; analyze() {analyze_walls[-1]:.2f} s wall, "
              f"{analyze_cpus[-1]:.2f} s CPU ({inner[2]} ops, {inner[3]} predicted on the Edge TPU)")
    print(f"median: command {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU; "
          f"analyze() {statistics.median(analyze_walls):.2f} s wall, {statistics.median(analyze_cpus):.2f} s CPU")


if __name__ == "__main__":
    main()
