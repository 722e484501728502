"""`edge evaluate` as a user runs it, against the bare invoke rate: images/s of the command itself.

    # 1. once, with the host venv: the int8 MobileNetV2 224 (uint8 I/O) and 600 640x480 JPEGs
    .venv/bin/python bench/edge/speed.py make --out /tmp/edge_speed --per-class 300
    # 2. in the device env (.ci/edge-env --make .venv39): the measurement, written to bench/results/edge_command.md
    .venv39/bin/python bench/edge/command.py --dir /tmp/edge_speed

It imports no TensorFlow. It copies the model beside a sidecar that records the pipeline's pixel
contract `pipeline export --int8` records for it (contract version 2, mean 128 and std 128, which the
input's scale 1/128 and zero point 128 already encode: camera bytes pass straight in), then, round after round, in
an order that alternates so drift in machine load hits each alike:
  bare      the interpreter the device side picks (1 thread), input set once, one invoke per image: its rate
            as invokes / wall time of the pass (what the ratios use: the same exposure to the machine's other
            load as the command) and as 1 / median invoke (the interpreter's own speed, load filtered out)
  runner    in this process, edge.answers.timing.end_to_end_rate: the runner's score loop alone
  command   `edge evaluate MODEL --data photos --out p.json --threads 1` as a subprocess (`python -m
            edge.cli`, what the `edge` script runs, with this tree first on PYTHONPATH), over all the JPEGs
            and over one of them; (N - 1) / (time(N) - time(1)) takes away process start, imports, the
            model's load and its first invoke, and leaves what the command does per image.
  baseline  with --baseline TREE (e.g. `git worktree add /tmp/before HEAD~3`): the same command from that
            source tree, in the same rounds, so a change is measured side by side with what it replaced.
Target: command / bare >= 0.75 with a free second core, which this machine shares: the
report gives every round, the CPU the command's process used per wall second, and the load average.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "edge_command.md"
TARGET = 0.75


def prepare(folder: Path, work: Path):
    """(model with its sidecar, data folder of every JPEG, data folder of one JPEG) under `work`."""
    from bench.edge.speed import CONTRACT, MODEL, PHOTOS, exported_contract
    from edge.model.integrity import write_sidecar

    model = work / MODEL
    shutil.copyfile(folder / MODEL, model)
    shutil.copyfile(folder / CONTRACT, work / CONTRACT)
    classes = sorted(p.name for p in (folder / PHOTOS).iterdir() if p.is_dir())
    labels = classes + [f"class{i}" for i in range(len(classes), 10)]  # the bench model has 10 outputs
    write_sidecar(model, labels=labels, image_size=224, preprocessing=exported_contract(folder).as_record())
    one = work / "one" / classes[0]
    one.mkdir(parents=True)
    first = sorted((folder / PHOTOS / classes[0]).glob("*.jpg"))[0]
    shutil.copyfile(first, one / first.name)
    return model, folder / PHOTOS, one.parent


def timed_command(tree: Path, model: Path, data: Path, out: Path, expect: int, extra=()):
    """(wall seconds, child CPU seconds) of one `edge evaluate` from source tree `tree` (with `extra` options), checking
    it scored `expect` images."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "edge.cli", "evaluate", str(model), "--data", str(data), "--out", str(out),
                           "--threads", "1", *extra], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not done.stdout.startswith(f"{expect} images"):
        raise SystemExit(f"edge evaluate failed or scored other than {expect} images:\n{done.stdout}\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def per_image(tree: Path, model: Path, photos: Path, one: Path, out: Path, count: int):
    """(images/s of the command over the images beyond the first, its CPU seconds per wall second meanwhile)."""
    t_all, cpu_all = timed_command(tree, model, photos, out, count)
    t_one, cpu_one = timed_command(tree, model, one, out, 1)
    # Above 1: decoding overlapped the invokes on a second core.
    return (count - 1) / (t_all - t_one), (cpu_all - cpu_one) / (t_all - t_one)


def rounds(model: Path, photos: Path, one: Path, count: int, out: Path, baseline: Optional[Path]):
    from bench.edge.speed import exported_contract
    from edge.answers.runner import Runner
    from edge.answers.timing import end_to_end_rate, invoke_seconds

    files = sorted(photos.rglob("*.jpg"))
    runner = Runner.with_contract(model, exported_contract(model.parent), edgetpu=False, threads=1)
    end_to_end_rate(runner, files[:8])  # warm-up: file cache, first invokes
    timed_command(ROOT, model, one, out, 1)

    def in_process():
        cpu, wall = _cpu_seconds(), time.perf_counter()
        rate = end_to_end_rate(runner, files)
        return rate, (_cpu_seconds() - cpu) / (time.perf_counter() - wall)

    paths = {"runner": in_process, "command": lambda: per_image(ROOT, model, photos, one, out, len(files))}
    if baseline:
        paths["baseline"] = lambda: per_image(baseline, model, photos, one, out, len(files))
    rows = []
    for r in range(count):
        steps = ["bare"] + list(paths)
        row = {}
        for step in (steps if r % 2 == 0 else steps[::-1]):
            if step == "bare":
                start = time.perf_counter()
                times = invoke_seconds(runner.interpreter, len(files))
                row["bare"], row["bare_median"] = len(files) / (time.perf_counter() - start), 1 / statistics.median(times)
            else:
                row[step] = paths[step]()  # (images/s, CPU seconds per wall second)
        rows.append(row)
    return runner, files, list(paths), rows


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(folder: Path, count: int, write: bool, baseline: Optional[Path]) -> int:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="edge-command-") as scratch:
        model, photos, one = prepare(folder, Path(scratch))
        runner, files, paths, rows = rounds(model, photos, one, count, Path(scratch) / "p.json", baseline)
        text = report(runner, files, paths, rows, model.read_bytes(), load_before, baseline)
    print(text)
    if write:
        RESULTS.write_text(text)
    return 0 if statistics.median(r["command"][0] / r["bare"] for r in rows) >= TARGET else 1


def _spread(values) -> str:
    values = list(values)
    return f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}, {len(values)} rounds)" if values else "no round"


NAMES = {"runner": "runner's loop in this process", "command": "`edge evaluate`", "baseline": "baseline `edge evaluate`"}


def report(runner, files, paths, rows, data: bytes, load_before, baseline: Optional[Path]) -> str:
    from bench.edge.machine import cpu_info, lscpu_block, source_commit

    backend = runner.loaded.backend
    version = getattr(sys.modules.get(backend.split(".")[0]), "__version__", "?")
    lines = [
        "# `edge evaluate` images/s against the bare invoke rate",
        "",
        f"- date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}, at commit {source_commit()}",
        f"- command: `{Path(sys.executable).parent.parent.name}/bin/python bench/edge/command.py {' '.join(sys.argv[1:])}`"
        f" (model and JPEGs from `bench/edge/speed.py make --per-class 300`)",
        f"- what is timed: `python -m edge.cli evaluate MODEL --data DIR --out p.json --threads 1` (what `edge` runs)"
        f" as a subprocess, over {len(files)} JPEGs and over 1; per image = (time({len(files)}) - time(1)) / {len(files) - 1}"
        + (f"; baseline: the same command from the source tree {baseline}" if baseline else ""),
        f"- CPU: {cpu_info()}; Python {platform.python_version()}, {platform.machine()}, numpy {np.__version__}",
        f"- interpreter: {backend} {version} ({runner.loaded.why}), 1 thread",
        f"- model: MobileNetV2 1.0 224, int8 as `pipeline export --int8` converts it (Coral's input wrapper: uint8 scale 1/128,"
        f" zero point 128), 10 classes ({len(data) / 1e6:.2f} MB), with a sidecar recording the contract the export records"
        " (mean 128, std 128: camera bytes pass straight in; JPEGs decoded at 1/2 scale)",
        f"- images: {len(files)} 640x480 JPEGs cut from scikit-learn's two photos (tests/support/helpers.py write_camera_jpegs)",
        f"- machine load (1-minute load average): {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after; the 2 cores are "
        "shared with other agents' work, so every ratio is taken within one round",
        "",
        *lscpu_block(),
        f"## {len(rows)} rounds: images/s, its share of the bare invoke rate, and CPU seconds per wall second",
        "",
        "CPU / wall near 1: the process had one core's worth (decoding could not overlap the invokes); near 2: a free second core.",
        "",
        "| round | bare invokes/s (1 / median invoke) | " + " | ".join(NAMES[p] for p in paths) + " |",
        "|---|---|" + "---|" * len(paths),
    ]
    for i, r in enumerate(rows):
        lines.append(f"| {i + 1} | {r['bare']:.1f} ({r['bare_median']:.1f}) | "
                     + " | ".join(f"{r[p][0]:.1f} ({r[p][0] / r['bare']:.2f}; CPU {r[p][1]:.2f})" for p in paths) + " |")
    lines += ["", "| path | share of the bare rate, all rounds | in rounds where it had a second core (CPU / wall >= 1.5) |",
              "|---|---|---|"]
    for p in paths:
        lines.append(f"| {NAMES[p]} | {_spread(r[p][0] / r['bare'] for r in rows)} | "
                     f"{_spread(r[p][0] / r['bare'] for r in rows if r[p][1] >= 1.5)} |")
    lines += [
        "",
        f"Target: `edge evaluate` >= {TARGET} of the bare invoke rate with a free second core. Per image, the command took "
        f"{statistics.median(1000 / r['command'][0] for r in rows):.2f} ms (median of all rounds) against "
        f"{statistics.median(1000 / r['bare'] for r in rows):.2f} ms per bare invoke.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="what `bench/edge/speed.py make` wrote")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--baseline", type=Path, default=None, help="another source tree whose `edge evaluate` to time alongside")
    args = parser.parse_args()
    return run(args.dir, args.rounds, not args.no_write, args.baseline)


if __name__ == "__main__":
    sys.exit(main())
