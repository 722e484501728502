"""The training feed with tf.data autotuning on and off: how long freeing its iterator takes, and its speed.

    .venv/bin/python bench/training/feed_teardown.py [--trials 12] [--seconds 4] [--data-dir DIR]

An iterator's destructor waits for tf.data's autotuning thread, which sleeps between optimizations
for a period that doubles up to a minute and can miss its cancellation. `pipeline train`'s feed
(pipeline/data/feed.py) now runs without that thread; this measures both sides of that choice on
the feed as training reads it (the whole-process effect is in bench/training/train_process.py).

Per trial, for each mode in turn (the first swapping every trial): `training_pipeline` over 1,024
camera-like 256x256 JPEGs in 4 TFRecord shards (the whole-process bench's data), decoded at 96 px
and cached as `pipeline train` caches them; the first epoch read whole (decoding), then batches
read for SECONDS with a 20 ms pause per batch (a training step), then the iterator freed and
timed. Speed: the first epoch's seconds (decoding into the cache) and the batches per second of
the whole run without the pauses, a second iterator read for SECONDS as fast as it goes.
Results: bench/results/feed_teardown.md (rewritten whole by each run).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

RESULTS = REPO / "bench" / "results" / "feed_teardown.md"
BATCH, SIZE, STEP_S = 32, 96, 0.02


def feed(pattern: str, autotune: bool):
    import tensorflow as tf

    from pipeline import data

    source = data.open_source(pattern)
    ds = data.training_pipeline(source.training_dataset(SIZE, source.indices("all")).cache(), BATCH, seed=0)
    if autotune:  # what the feed did before: TensorFlow's default
        options = tf.data.Options()
        options.autotune.enabled = True
        ds = ds.with_options(options)
    return ds, source.num_examples // BATCH


def trial(pattern: str, autotune: bool, seconds: float) -> dict:
    ds, steps = feed(pattern, autotune)
    it = iter(ds)
    started = time.perf_counter()
    for _ in range(steps):
        next(it)
    first = time.perf_counter() - started
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        next(it)
        time.sleep(STEP_S)
    freed = time.perf_counter()
    del it
    teardown = time.perf_counter() - freed
    it, n = iter(ds), 0
    for _ in range(steps):  # the cache is per iterator's dataset: fill it again, untimed
        next(it)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        next(it)
        n += 1
    del it
    return {"teardown": teardown, "first_epoch": first, "batches_per_s": n / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--data-dir", default=None, help="the whole-process bench's data folder (made when absent)")
    args = parser.parse_args()
    import tempfile

    from bench.training import train_process

    with tempfile.TemporaryDirectory() as tmp:
        pattern = train_process.make_data(Path(args.data_dir or tmp))["train"]
        rows = {"on": [], "off": []}
        loads = [os.getloadavg()[0]]
        for i in range(args.trials):
            for mode in (("off", "on") if i % 2 == 0 else ("on", "off")):
                rows[mode].append(trial(pattern, mode == "on", args.seconds))
                r = rows[mode][-1]
                print(f"trial {i + 1} autotune {mode}: teardown {r['teardown']:.2f} s, first epoch {r['first_epoch']:.2f} s, "
                      f"{r['batches_per_s']:.0f} batches/s", flush=True)
            loads.append(os.getloadavg()[0])
    write(args, rows, loads)


def write(args, rows: dict, loads: list) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), "unknown CPU")
    lines = ["# Freeing the training feed's iterator, tf.data autotuning on and off", "",
             f"Command: `.venv/bin/python bench/training/feed_teardown.py --trials {args.trials} --seconds {args.seconds:g}`  ",
             f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {cpu}, {os.cpu_count()} CPUs shared with other "
             f"jobs, load average {min(loads):.1f}-{max(loads):.1f}; Python {sys.version.split()[0]}", "",
             f"`training_pipeline` over the whole-process bench's 1,024 JPEGs ({SIZE} px, cached, batch {BATCH}); per trial, the "
             f"two modes alternated: the first epoch read (decoding), batches read for {args.seconds:g} s with a {STEP_S * 1000:.0f} ms "
             "pause each (a training step), the iterator freed; then a second iterator read as fast as it goes for "
             f"{args.seconds:g} s after its first epoch.", "",
             "| autotune | freeing the iterator: over 0.1 s | max s | median s | first epoch s (median) | batches/s (median) |",
             "|---|---|---|---|---|---|"]
    for mode in ("on", "off"):
        r = rows[mode]
        t = [x["teardown"] for x in r]
        lines.append(f"| {mode}{' (the feed now)' if mode == 'off' else ' (before)'} | {sum(x > 0.1 for x in t)} of {len(t)} | "
                     f"{max(t):.2f} | {statistics.median(t):.3f} | {statistics.median(x['first_epoch'] for x in r):.2f} | "
                     f"{statistics.median(x['batches_per_s'] for x in r):.0f} |")
    on, off = rows["on"], rows["off"]
    ratio = statistics.median(b["batches_per_s"] / a["batches_per_s"] for a, b in zip(on, off))
    first = statistics.median(b["first_epoch"] / a["first_epoch"] for a, b in zip(on, off))
    lines += ["", f"Per-trial ratios off / on (medians): batches/s {ratio:.2f}, first epoch's seconds {first:.2f}."]
    RESULTS.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
