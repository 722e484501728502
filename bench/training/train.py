"""Training benchmarks: does the TFRecord feed keep up, and how long does digits take?

    .venv/bin/python bench/training/train.py        writes bench/results/train.md

1. Steps per second of whole training runs (`model.fit`, 3 and 10 epochs: RUN_LENGTHS; small_cnn 32x32,
   global batch 32) fed three ways, interleaved over ROUNDS rounds on the same model; medians:
   - tfrecord: what `pipeline train` builds by default: shards read interleaved, JPEGs parsed,
     decoded and resized in the first epoch, kept in memory (the decoded set fits --cache-mb);
   - tfrecord, streamed: the same with --cache-mb 0: every epoch reads and decodes again;
   - cached batches: the same examples decoded beforehand into memory (the reference: no input
     work in the timed run but shuffling and batching).
   Target: tfrecord / cached batches >= 0.95 over a whole run of at least 3 epochs.
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
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

ROUNDS = 3
RUN_LENGTHS = (3, 10)  # epochs: the least the target allows (decoding weighs most), and pipeline train's default
BATCH = 32
FEEDS = ("tfrecord", "tfrecord, streamed", "cached batches")


def epoch_clock():
    import tf_keras as keras

    class EpochClock(keras.callbacks.Callback):
        """Seconds of each epoch, first step to last: the shuffle buffer's first fill (and so the first
        epoch's decoding) is inside; fit's own set-up, which stalls by seconds at random on a shared
        machine and is the same for every feed, is not."""

        def __init__(self):
            super().__init__()
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self.started)

    return EpochClock


def input_pipeline_ratio(tmp: Path, epochs: int) -> dict:
    import tensorflow as tf
    import tf_keras as keras

    import models
    from pipeline import data
    from tests.support.helpers import write_kaggle_tfrecords

    pattern = write_kaggle_tfrecords(tmp / "tfrec", per_class=700, files=8)  # 2,100 JPEGs
    source = data.open_source(pattern)
    indices = source.indices("all")
    images, labels = data.to_numpy(source.dataset_at(32, indices))
    feeds = {
        "tfrecord": lambda: data.training_pipeline(source.training_dataset(32, indices), BATCH, seed=0, cache=True),
        "tfrecord, streamed": lambda: data.training_pipeline(source.training_dataset(32, indices), BATCH, seed=0),
        "cached batches": lambda: data.training_pipeline(tf.data.Dataset.from_tensor_slices((images, labels)), BATCH,
                                                         seed=0, cache=True),
    }
    EpochClock = epoch_clock()
    model = models.build("small_cnn", len(source.labels), 32)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
    steps = len(indices) // BATCH
    model.fit(feeds["cached batches"](), epochs=1, steps_per_epoch=steps, verbose=0)  # traces the step: not timed
    rates = {name: [] for name in FEEDS}
    for _ in range(ROUNDS):
        for name in FEEDS:
            clock = EpochClock()
            model.fit(feeds[name](), epochs=epochs, steps_per_epoch=steps, verbose=0, callbacks=[clock])
            rates[name].append(epochs * steps / sum(clock.seconds))
    medians = {name: statistics.median(r) for name, r in rates.items()}
    return {"epochs": epochs, "examples": source.num_examples, "steps": steps, "rates": rates, "medians": medians,
            "ratio": medians["tfrecord"] / medians["cached batches"],
            "streamed_ratio": medians["tfrecord, streamed"] / medians["cached batches"]}


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


def cpu_flags() -> str:
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "CPU flags unknown"
    return "AVX512_VNNI" if "avx512_vnni" in flags else ("AVX2" if "avx2" in flags else "no AVX2")


def main() -> None:
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        pipelines = [input_pipeline_ratio(Path(tmp) / str(epochs), epochs) for epochs in RUN_LENGTHS]
        digits = digits_runs(Path(tmp))
    load = os.getloadavg()
    lines = [
        "# Training benchmarks", "",
        "Command: `.venv/bin/python bench/training/train.py`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU(s) ({cpu_flags()}), load average {load[0]:.1f} at the end; "
        f"Python {platform.python_version()}, TensorFlow {tf.__version__}", "",
    ]
    for pipeline in pipelines:
        m = pipeline["medians"]
        lines += [
            f"## Whole {pipeline['epochs']}-epoch training runs by feed (small_cnn 32x32, global batch {BATCH}, "
            f"{pipeline['examples']} JPEGs in 8 TFRecord files)", "",
            f"Each run: `model.fit`, {pipeline['epochs']} epochs of {pipeline['steps']} steps, from a new dataset; "
            f"timed from each epoch's start to its end, summed (first-epoch decoding included, fit's set-up not); "
            f"{ROUNDS} rounds, the feeds interleaved in each; medians of steps/s.", "",
            "| feed | steps/s (median) | all rounds | / cached batches |", "|---|---|---|---|",
        ]
        for name in FEEDS:
            lines.append(f"| {name} | {m[name]:.1f} | {', '.join(f'{r:.1f}' for r in pipeline['rates'][name])} | "
                         f"{m[name] / m['cached batches']:.3f} |")
        verdict = "pass" if pipeline["ratio"] >= 0.95 else "FAIL"
        lines += ["", f"Ratio tfrecord (train's default feed) / cached batches over {pipeline['epochs']} epochs: "
                  f"**{pipeline['ratio']:.3f}** (target >= 0.95): {verdict}. Streamed (--cache-mb 0): "
                  f"{pipeline['streamed_ratio']:.3f} (no target).", ""]
    lines += [
              "## `pipeline train --data digits` (defaults: small_cnn, 32x32, 10 epochs), subprocess wall time", "",
              "| run | seconds | target | held-out accuracy | target |", "|---|---|---|---|---|"]
    for i, r in enumerate(digits, 1):
        lines.append(f"| {i} | {r['seconds']:.1f} | {'pass' if r['seconds'] < 60 else 'FAIL'} (< 60) | "
                     f"{r['accuracy']:.4f} | {'pass' if r['accuracy'] >= 0.95 else 'FAIL'} (>= 0.95) |")
    text = "\n".join(lines) + "\n"
    out = REPO / "bench" / "results" / "train.md"
    # bench/training/train_process.py's section follows its marker: kept as it is.
    mark = "<!-- bench/training/train_process.py:"
    kept = out.read_text().partition(mark) if out.exists() else ("", "", "")
    out.write_text(text + ("\n" + kept[1] + kept[2] if kept[1] else ""))
    print(text)


if __name__ == "__main__":
    main()
