"""Held-out accuracy per epoch with and without BatchNorm re-estimation, on camera-size photo folders.

    .venv/bin/python bench/training/batchnorm.py            writes bench/results/batchnorm.md

The issue-20 case: 4 classes (which half of which of scikit-learn's two photos a crop comes from),
240 training and 80 held-out 640x480 JPEGs (tests/support/helpers.py write_camera_jpegs(halves=True)),
trained from scratch as `pipeline train --data train --val-data val --model M --image-size 96
--epochs 15` does it. "without" is the same code with the re-estimation callback left out, that
is Keras' moving averages, as train.py did before: training itself is the same (same seed, same
batches), only the statistics validation and the saved model use differ. Each run is a fresh
subprocess, side by side in one invocation.
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
RUNS = (  # model, options, image size, epochs
    ("mobilenet_v2", {"alpha": 0.35}, 96, 15),
    ("xception", {}, 96, 15),
)


def one(model: str, options: dict, size: int, epochs: int, variant: str, data: Path, out: Path) -> None:
    """In a fresh process: train one model, with or without re-estimation."""
    sys.path.insert(0, str(REPO))
    from pipeline import train
    from pipeline.training import batchnorm

    if variant == "without":
        batchnorm.Statistics.callbacks = property(lambda self: [])  # Keras' moving averages only
    train.train_model(train.TrainConfig(data=str(data / "train"), val_data=str(data / "val"), model=model, image_size=size,
                                model_options=tuple(sorted(options.items())), epochs=epochs), out)


def main() -> None:
    sys.path.insert(0, str(REPO))
    from tests.support.helpers import write_camera_jpegs

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "photos"
        write_camera_jpegs(data / "train", per_class=60, seed=0, halves=True)
        write_camera_jpegs(data / "val", per_class=20, seed=1, halves=True)
        for model, options, size, epochs in RUNS:
            row = {"model": model, "options": options, "size": size, "epochs": epochs}
            for variant in ("without", "with"):
                out = Path(tmp) / f"{model}-{variant}"
                start = time.perf_counter()
                cpu = os.times()
                done = subprocess.run([sys.executable, __file__, "--one", json.dumps([model, options, size, epochs, variant,
                                                                                     str(data), str(out)])],
                                      cwd=REPO, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
                after = os.times()
                if done.returncode != 0:
                    raise SystemExit(f"{model} {variant} failed:\n{done.stderr[-3000:]}")
                manifest = json.loads((out / "manifest.json").read_text())
                row[variant] = {
                    "val_accuracy": [e["val_accuracy"] for e in json.loads((out / "history.json").read_text())],
                    "train_accuracy": [e["accuracy"] for e in json.loads((out / "history.json").read_text())],
                    "heldout": manifest["metrics"]["heldout"]["accuracy"],
                    "wall_s": time.perf_counter() - start,
                    "cpu_s": (after.children_user + after.children_system) - (cpu.children_user + cpu.children_system),
                    "batchnorm": manifest["training"]["batchnorm"],
                    "warned": "warning: held-out accuracy" in done.stderr,
                }
            results.append(row)
    write(results)


def write(results) -> None:
    import subprocess as sp

    cpu = next((line.split(":", 1)[1].strip() for line in sp.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), platform.processor())
    lines = ["# BatchNorm statistics: held-out accuracy per epoch with and without re-estimation", "",
             "Command: `.venv/bin/python bench/training/batchnorm.py`  ",
             f"Machine: {cpu}, {os.cpu_count()} CPUs shared with other jobs (load average {os.getloadavg()[0]:.1f} at the end), "
             f"Python {platform.python_version()}", "",
             "Data: 4 classes (half of one of scikit-learn's two photos), 240 training and 80 held-out 640x480 JPEGs "
             "(`write_camera_jpegs(halves=True)`, seeds 0 and 1), from scratch, global batch 32 (7 steps an epoch), "
             "default schedule. \"without\": Keras' moving averages (the code before BatchNorm re-estimation); \"with\": statistics "
             "re-estimated before every epoch's validation. Training is the same in both (same seed and batches); "
             "the held-out figures differ only by the BatchNorm statistics.", ""]
    for row in results:
        w, r = row["without"], row["with"]
        opts = "".join(f" --{k} {v}" for k, v in row["options"].items())
        lines += [f"## {row['model']}{opts}, {row['size']} px, {row['epochs']} epochs", "",
                  f"`pipeline train --data train --val-data val --model {row['model']}{opts} --image-size {row['size']} "
                  f"--epochs {row['epochs']} --out RUN`", "",
                  "| epoch | training accuracy | held-out, without | held-out, with |", "|---|---|---|---|"]
        for i, (ta, a, b) in enumerate(zip(r["train_accuracy"], w["val_accuracy"], r["val_accuracy"]), 1):
            lines.append(f"| {i} | {ta:.4f} | {a:.4f} | {b:.4f} |")
        bn = r["batchnorm"]
        lines += ["", f"- saved model's held-out accuracy: without {w['heldout']:.4f}, with {r['heldout']:.4f}; "
                      f"train's chance warning: without {'printed' if w['warned'] else 'not printed'}, "
                      f"with {'printed' if r['warned'] else 'not printed'}",
                  f"- time (whole `train` process): without {w['wall_s']:.0f} s wall / {w['cpu_s']:.0f} s CPU, "
                  f"with {r['wall_s']:.0f} s wall / {r['cpu_s']:.0f} s CPU; the {bn['estimates']} estimates "
                  f"({bn['layers']} layers, {bn['batches']} batches, {bn['examples']} examples each) took {bn['seconds']:.1f} s",
                  f"- momentum of the layers (unchanged): {bn['momentum']}", ""]
    out = REPO / "bench" / "results" / "batchnorm.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        model, options, size, epochs, variant, data, out = json.loads(sys.argv[2])
        one(model, options, size, epochs, variant, Path(data), Path(out))
    else:
        main()
