"""Time of the pre-flight with the cost model on one file, in-process (what runs before every compile).

    .venv/bin/python bench/edgetpu_cost/preflight_time.py /work/cache-cost/resnet50_v1_299.tflite [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from edge.model.tflite_file import read_model  # noqa: E402
from pipeline.edgetpu import cost, preflight  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("model", type=Path)
parser.add_argument("--repeat", type=int, default=5)
args = parser.parse_args()
rows = []
for _ in range(args.repeat):
    t0 = time.perf_counter()
    data = args.model.read_bytes()
    info = read_model(data)
    pre = preflight.analyze(data, info=info)  # as `pipeline compile` runs them: the file read once
    t1 = time.perf_counter()
    estimate = cost.for_model(info, pre)
    t2 = time.perf_counter()
    rows.append((t1 - t0, t2 - t1))
print(f"{args.model.name}: {len(data) / 2**20:.1f} MiB, {len(pre.rows)} ops; median of {args.repeat}: pre-flight "
      f"{statistics.median(r[0] for r in rows):.3f} s, cost model {statistics.median(r[1] for r in rows):.3f} s")
print("\n".join(estimate.lines()))
