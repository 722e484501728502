"""What the per-layer error report costs `pipeline export --int8`: the command with it and with --no-layer-errors.

    .venv/bin/python bench/export/layer_errors.py [--rounds 2] [--work DIR] > bench/results/export_report.md

For each case a run is trained once (1 epoch on a small class folder: the export's cost depends on the graph, not on
the weights), then `pipeline export RUN --int8` and `pipeline export RUN --int8 --no-layer-errors` run as commands on
fresh copies of it (each named `run`, as the model's metadata records the run folder's name), alternated within each round so that the machine's load hits both alike. The int8 files of the
two must be the same bytes. Cases: the small CNN with its float TFLite exported first (as `pipeline run` does: the
report's float size is read, not converted), and EfficientNetB0 at 32 px without one (the float model is converted
for its size).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

CASES = {"small_cnn, float exported first": ("small_cnn", 32, True),
         "efficientnet_b0 32 px, no float export": ("efficientnet_b0", 32, False)}


def _pipeline(*args) -> float:
    start = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).parent / "pipeline"), *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"pipeline {' '.join(map(str, args))} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start


def _trained(work: Path, model: str, size: int, with_float: bool) -> Path:
    from pipeline import train
    from tests.support.helpers import write_class_folders

    data = write_class_folders(work / f"data_{model}", per_class=4)
    with contextlib.redirect_stdout(sys.stderr):  # training's progress lines are not the results
        run = train.train_model(train.TrainConfig(data=str(data), model=model, image_size=size, epochs=1, batch_size=4,
                                                  heldout_fraction=0.25), work / f"run_{model}")
    if with_float:
        _pipeline("export", run)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="export_report_"))
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    rows = []
    for name, (model, size, with_float) in CASES.items():
        run = _trained(work, model, size, with_float)
        times = {"with": [], "without": []}
        models = {}
        for r in range(args.rounds):
            for way, extra in (("with", []), ("without", ["--no-layer-errors"])):
                copy = work / f"copy_{model}_{way}_{r}" / "run"  # one folder name: the metadata records it
                shutil.copytree(run, copy)
                times[way].append(_pipeline("export", copy, "--int8", *extra))
                models.setdefault(way, (copy / "model_int8.tflite").read_bytes())
                assert (copy / "quantization.json").exists() == (way == "with")
        assert models["with"] == models["without"], f"{name}: the int8 files differ"
        ratios = [w / f for w, f in zip(times["without"], times["with"])]
        rows.append((name, statistics.median(times["with"]), statistics.median(times["without"]), statistics.median(ratios)))
    print(f"# `pipeline export --int8` with and without the per-layer error report, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    print(f"- command: `.venv/bin/python bench/export/layer_errors.py --rounds {args.rounds}`")
    print(f"- machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
          f"{' / '.join(f'{x:.1f}' for x in load_before)} before, {' / '.join(f'{x:.1f}' for x in os.getloadavg())} after")
    print("- what is timed: the command `pipeline export COPY --int8 [--no-layer-errors]` on a fresh copy of the run, "
          "start-up included; the two alternated in each round; median over rounds\n")
    print("| case | with the report, s | --no-layer-errors, s | without / with (median of the rounds' ratios) |")
    print("|---|---|---|---|")
    for name, with_, without, ratio in rows:
        print(f"| {name} | {with_:.1f} | {without:.1f} | {ratio:.2f} |")
    print("\nThe int8 file is the same bytes either way (checked above for every case).")


if __name__ == "__main__":
    main()
