"""Training benchmarks: is the TFRecord input pipeline the bottleneck, and how long does digits take?

    /work/venv/bin/python bench/bench_train.py        writes bench/results/train.md

1. Training steps per second of small_cnn (32x32, global batch 32) fed by the real pipeline
   (TFRecords of JPEGs: parse, decode, resize, shuffle, batch, prefetch) over the same batches
   cached in memory after decoding. Both run from one long-lived iterator each, interleaved over
   several rounds on the same model; medians. Target: ratio >= 0.9.
2. `pipeline train --data digits` with defaults, as a subprocess (TensorFlow's import included).
   Targets: under 60 s on a 2-core CPU, held-out accuracy >= 0.95.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ROUNDS = 5
STEPS = 60  # timed steps per round and variant
WARMUP_STEPS = 80  # > one pass over the data, so the cached variant's cache is full


def steps_per_second(step, iterator, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        logs = step(next(iterator))
    float(logs["loss"])  # wait for the last step
    return n / (time.perf_counter() - start)


def input_pipeline_ratio(tmp: Path) -> dict:
    import tensorflow as tf
    import tf_keras as keras

    import models
    from pipeline import data
    from tests.helpers import write_kaggle_tfrecords

    pattern = write_kaggle_tfrecords(tmp / "tfrec", per_class=700, files=8)  # 2,100 JPEGs
    source = data.open_source(pattern)
    model = models.build("small_cnn", len(source.labels), 32)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
    step = tf.function(model.train_step)
    variants = {
        "tfrecord": iter(data.training_pipeline(source.dataset(32), 32, seed=0)),
        "cached": iter(data.training_pipeline(source.dataset(32), 32, seed=0, cache=True)),
    }
    for iterator in variants.values():
        steps_per_second(step, iterator, WARMUP_STEPS)
    rates = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, iterator in variants.items():
            rates[name].append(steps_per_second(step, iterator, STEPS))
    medians = {name: statistics.median(r) for name, r in rates.items()}
    return {"examples": source.num_examples, "rates": rates, "medians": medians,
            "ratio": medians["tfrecord"] / medians["cached"]}


def digits_runs(tmp: Path, count: int = 2) -> list:
    runs = []
    for i in range(count):
        out = tmp / f"digits{i}"
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "pipeline", "train", "--data", "digits", "--out", str(out)],
                                cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if result.returncode != 0:
            raise SystemExit(f"pipeline train failed:\n{result.stderr[-3000:]}")
        accuracy = json.loads((out / "manifest.json").read_text())["metrics"]["heldout"]["accuracy"]
        runs.append({"seconds": seconds, "accuracy": accuracy})
    return runs


def main() -> None:
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        pipeline = input_pipeline_ratio(Path(tmp))
        digits = digits_runs(Path(tmp))
    load = os.getloadavg()
    m = pipeline["medians"]
    lines = [
        "# Training benchmarks", "",
        "Command: `/work/venv/bin/python bench/bench_train.py`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU(s), load average {load[0]:.1f} at the end; "
        f"Python {platform.python_version()}, TensorFlow {tf.__version__}", "",
        f"## Input pipeline vs cached batches (small_cnn 32x32, global batch 32, {pipeline['examples']} JPEGs in 8 TFRecord files)", "",
        f"{ROUNDS} interleaved rounds of {STEPS} steps each after {WARMUP_STEPS} warm-up steps; medians.", "",
        "| feed | steps/s (median) | all rounds |", "|---|---|---|",
    ]
    for name in ("tfrecord", "cached"):
        lines.append(f"| {name} | {m[name]:.1f} | {', '.join(f'{r:.1f}' for r in pipeline['rates'][name])} |")
    verdict = "pass" if pipeline["ratio"] >= 0.9 else "FAIL"
    lines += ["", f"Ratio tfrecord / cached: **{pipeline['ratio']:.3f}** (target >= 0.9): {verdict}", "",
              "## `pipeline train --data digits` (defaults: small_cnn, 32x32, 10 epochs), subprocess wall time", "",
              "| run | seconds | target | held-out accuracy | target |", "|---|---|---|---|---|"]
    for i, r in enumerate(digits, 1):
        lines.append(f"| {i} | {r['seconds']:.1f} | {'pass' if r['seconds'] < 60 else 'FAIL'} (< 60) | "
                     f"{r['accuracy']:.4f} | {'pass' if r['accuracy'] >= 0.95 else 'FAIL'} (>= 0.95) |")
    text = "\n".join(lines) + "\n"
    (REPO / "bench" / "results" / "train.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
