"""Detection on `shapes`: the command's wall time and held-out COCO mAP, and whether the TFRecord feed keeps up.

    .venv/bin/python bench/detect/shapes.py [--skip-run] [--skip-feed] [-- EXTRA TRAIN OPTIONS]

1. `pipeline train --task detect --data shapes` with defaults, as a subprocess (TensorFlow's import, drawing
   the data, training, COCOeval on the held-out split, the run's files and report): wall time and CPU time, and
   the manifest's mAP@.5 and mAP@[.5:.95]. Targets: mAP@.5 >= 0.90 and mAP@[.5:.95] >= 0.60 for the
   float model, under 4 minutes on a 2-core machine. Options after `--` are added (tuning). Then `pipeline run
   --task detect` on that run (it reuses the training: export float and int8, compile pre-flight, parity),
   timed too: the whole detection run.
2. Training steps per second fed two ways, interleaved over ROUNDS rounds on the same model, medians:
   - tfrecord: what `pipeline train --task detect` builds from shards in the TF Object Detection API's schema
     (read and checked once, decoded images kept in memory, flip/crop/resize and anchor targets every step);
   - cached batches: the same pipeline's batches made beforehand and replayed from memory (no input work).
   Target: tfrecord / cached batches >= 0.95.
"""
from __future__ import annotations

import argparse
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
FEED_STEPS = 40  # per timed fit; the same batches for both feeds' sizes
FEED_DATA = "shapes?count=400"


def command_run(tmp: Path, extra) -> dict:
    run_dir = tmp / "run"
    args = ["train", "--task", "detect", "--data", "shapes", *extra]
    wall, cpu, _ = _timed([*args, "--out", str(run_dir)])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    history = json.loads((run_dir / "history.json").read_text())
    heldout = manifest["metrics"]["heldout"]
    rest_wall, rest_cpu, rest = _timed(["run", "--task", "detect", "--out", str(run_dir)], allowed=(0, 1))
    parity = json.loads((run_dir / "parity" / "report.json").read_text())
    return {"command": "pipeline " + " ".join(args) + " --out RUN", "wall_s": wall, "cpu_s": cpu, "rest_wall_s": rest_wall,
            "rest_cpu_s": rest_cpu, "parity": parity["models"], "gate": parity["gate"]["passed"], "map50": heldout["map50"], "map": heldout["map"],
            "per_class": manifest["metrics"]["heldout_per_class"], "train_s": sum(e["seconds"] for e in history),
            "epochs": len(history), "steps_per_epoch": manifest["training"]["steps_per_epoch"],
            "batch": manifest["training"]["global_batch"], "images": manifest["data"]["split"],
            "image_size": manifest["model"]["image_size"]}


def _timed(args, allowed=(0,)):
    """Run `pipeline ARGS`; (wall seconds, CPU seconds of the child, the completed process)."""
    command = [sys.executable, "-m", "pipeline", *args]
    before = os.times()
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - start
    after = os.times()
    if result.returncode not in allowed:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system), result


def feed_ratio(tmp: Path) -> dict:
    from pipeline import tasks
    from pipeline.tasks.detect.data.specs import open_detection
    from pipeline.tasks.detect.data.tfrecords import write_tfrecords
    from pipeline.training import fit, strategy as strategy_mod
    from pipeline.training.config import config_from_options

    write_tfrecords(open_detection(FEED_DATA), str(tmp / "records"), shards=4)
    config = config_from_options({"task": "detect", "data": str(tmp / "records" / "*.tfrecord")}, {})
    chosen = strategy_mod.choose(None, 1)
    task = tasks.get("detect")
    plan = task.plan(config, chosen)
    built = task.build(config, len(plan.train_source.labels))
    fit.compile_model(built.model, config, chosen, task)
    train = plan.train.cache()  # as pipeline train does when the decoded set fits --cache-mb
    cached = task.training_batches(train, config, config.seed).take(FEED_STEPS).cache()
    for _ in cached:  # filled now, outside the timing
        pass
    feeds = {"tfrecord": lambda: task.training_batches(train, config, config.seed), "cached batches": lambda: cached.repeat()}
    built.model.fit(feeds["cached batches"](), epochs=1, steps_per_epoch=FEED_STEPS, verbose=0)  # traces the step
    built.model.fit(feeds["tfrecord"](), epochs=1, steps_per_epoch=FEED_STEPS, verbose=0)  # fills the decoded cache
    rates = {name: [] for name in feeds}
    for _ in range(ROUNDS):
        for name, make in feeds.items():
            ds = make()
            start = time.perf_counter()
            built.model.fit(ds, epochs=1, steps_per_epoch=FEED_STEPS, verbose=0)
            rates[name].append(FEED_STEPS / (time.perf_counter() - start))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {"rates": rates, "medians": medians, "ratio": medians["tfrecord"] / medians["cached batches"],
            "batch": config.batch_size, "image_size": config.size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-run", action="store_true")
    parser.add_argument("--skip-feed", action="store_true")
    parser.add_argument("extra", nargs="*", help="after --: options for pipeline train --task detect instead of pipeline run")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start, "
          f"Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_run:
            r = command_run(Path(tmp), args.extra)
            print(f"command: {r['command']}")
            print(f"data: {r['images']['train_examples']} train, {r['images']['heldout_examples']} held-out images at {r['image_size']} px; "
                  f"{r['epochs']} epochs x {r['steps_per_epoch']} steps x batch {r['batch']}, training {r['train_s']:.1f} s")
            print(f"held-out mAP@.5 {r['map50']:.4f}  mAP@[.5:.95] {r['map']:.4f}  per class "
                  + ", ".join(f"{k} {v:.3f}" for k, v in r["per_class"].items()))
            print(f"wall time of the command: {r['wall_s']:.1f} s, CPU time {r['cpu_s']:.1f} s (load average now {os.getloadavg()[0]:.1f})")
            print("then pipeline run --task detect on it (export float and int8, compile pre-flight, parity): "
                  f"{r['rest_wall_s']:.1f} s wall, {r['rest_cpu_s']:.1f} s CPU; whole run {r['wall_s'] + r['rest_wall_s']:.1f} s")
            print("parity: " + "; ".join(f"{k} mAP@.5 {m['map50']:.4f} mAP {m['map']:.4f} agreement {m['agreement']:.4f}"
                                         for k, m in r["parity"].items()) + f"; gate {'passed' if r['gate'] else 'FAILED'}")
        if not args.skip_feed:
            f = feed_ratio(Path(tmp))
            print(f"feed ({FEED_DATA}, batch {f['batch']}, {f['image_size']} px, {FEED_STEPS} steps x {ROUNDS} rounds, steps/s): "
                  + "; ".join(f"{k} median {f['medians'][k]:.2f} ({', '.join(f'{v:.2f}' for v in f['rates'][k])})" for k in f["rates"]))
            print(f"ratio tfrecord / cached batches: {f['ratio']:.3f} (target >= 0.95)")


if __name__ == "__main__":
    main()
