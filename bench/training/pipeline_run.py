"""Time `pipeline run` with its defaults (the README's main command) and check its accuracy target.

    .venv/bin/python bench/training/pipeline_run.py        writes bench/results/pipeline_run.md

Targets: under 3 minutes on a 2-core CPU, TensorFlow's import included; int8 held-out
accuracy within 1 percentage point of the float model. Each run is a fresh subprocess into a new
run directory, so nothing is reused.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNS = 2


def one_run() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "pipeline", "run", "--out", str(Path(tmp) / "run")],
                                cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if result.returncode != 0:
            raise SystemExit(f"pipeline run failed ({result.returncode}):\n{result.stderr[-3000:]}")
        parity = json.loads((Path(tmp) / "run" / "manifest.json").read_text())["parity"]
    return {"seconds": seconds, "float": parity["float_savedmodel"]["top1"], "int8": parity["int8_cpu"]["top1"],
            "agreement": parity["int8_cpu"]["agreement"]}


def main() -> None:
    runs = [one_run() for _ in range(RUNS)]
    load = os.getloadavg()
    lines = [
        "# `pipeline run` with defaults (small_cnn on digits)", "",
        "Command: `.venv/bin/python bench/training/pipeline_run.py`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU(s), load average {load[0]:.1f} at the end, "
        f"Python {platform.python_version()}", "",
        "| run | wall time (s) | target | float top-1 | int8 top-1 | drop (pp) | target | agreement |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, 1):
        drop = (r["float"] - r["int8"]) * 100
        lines.append(f"| {i} | {r['seconds']:.1f} | {'pass' if r['seconds'] < 180 else 'FAIL'} (< 180) | {r['float']:.4f} | "
                     f"{r['int8']:.4f} | {drop:.2f} | {'pass' if drop <= 1.0 else 'FAIL'} (<= 1.0) | {r['agreement']:.4f} |")
    text = "\n".join(lines) + "\n"
    out = REPO / "bench" / "results" / "pipeline_run.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
