"""`pipeline predict` throughput: the float SavedModel in batches against the int8 TFLite model, images/s.

    .venv/bin/python bench/edge/predict.py                         MobileNetV2 at 224 and small_cnn at 32, 512 images
    .venv/bin/python bench/edge/predict.py --images 256 --rounds 2 --models small_cnn

Kaggle-like data: test shards in the Kaggle TPU schema (`image`, `id`, no `class`) of 224x224 JPEGs
cropped from scikit-learn's two photos; a training set of the same kind. Per model: train one epoch
(weights=None: nothing downloads; throughput does not depend on what the weights learned), export int8,
then run `pipeline predict` as a subprocess per configuration, the configurations interleaved round by
round so drift in the machine's load hits all alike. The rate is what predict prints: images over the
time spent reading, decoding and scoring (model load excluded, printed apart); the wall time of the
whole command (TensorFlow's import, the id pass, the float model's image check) is reported too.
Writes bench/results/predict.md.
"""
from __future__ import annotations

import argparse
import io
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results" / "predict.md"
SIZES = {"mobilenet_v2": 224, "small_cnn": 32}


def write_shards(folder: Path, count: int, with_class: bool, seed: int, files: int = 4) -> None:
    import sklearn
    import tensorflow as tf
    from PIL import Image

    photos_dir = Path(sklearn.__file__).parent / "datasets" / "images"
    photos = [Image.open(photos_dir / f"{n}.jpg").convert("RGB") for n in ("china", "flower")]
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    writers = [tf.io.TFRecordWriter(str(folder / f"{folder.name}{k:02d}.tfrec")) for k in range(files)]
    for n in range(count):
        label = n % 2
        photo = photos[label]
        w, h = int(rng.integers(150, photo.width)), int(rng.integers(150, photo.height))
        x, y = int(rng.integers(0, photo.width - w + 1)), int(rng.integers(0, photo.height - h + 1))
        out = io.BytesIO()
        photo.crop((x, y, x + w, y + h)).resize((224, 224), Image.BILINEAR).save(out, format="JPEG", quality=90)
        feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[out.getvalue()])),
                   "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[rng.bytes(5).hex()[:9].encode()]))}
        if with_class:
            feature["class"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
        writers[n % files].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    for w in writers:
        w.close()


def pipeline(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TPU_NAME", None)
    env.pop("TF_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"pipeline {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="mobilenet_v2,small_cnn")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_shards(root / "train", 64, True, 0)
        write_shards(root / "test", args.images, False, 1)
        for model in args.models.split(","):
            run = root / model
            pipeline("train", "--data", str(root / "train" / "*.tfrec"), "--out", str(run), "--model", model,
                     "--image-size", str(SIZES[model]), "--epochs", "1", "--batch-size", "32")
            pipeline("export", str(run), "--int8", "--calibration-samples", "64")
            configs = {
                "float SavedModel, batch 128 (the default)": ["--model", "float", "--batch-size", "128"],
                "float SavedModel, batch 32": ["--model", "float", "--batch-size", "32"],
                "int8 TFLite, interpreter's default threads": ["--model", "int8"],
                "int8 TFLite, --threads 2": ["--model", "int8", "--threads", "2"],
            }
            rates = {name: [] for name in configs}
            walls = {name: [] for name in configs}
            for _ in range(args.rounds):
                for name, options in configs.items():
                    start = time.perf_counter()
                    done = pipeline("predict", str(run), "--data", str(root / "test" / "*.tfrec"), "--out",
                                    str(root / "out.csv"), *options)
                    walls[name].append(time.perf_counter() - start)
                    rates[name].append(float(re.search(r"([0-9.]+) images/s", done.stdout).group(1)))
            for name, options in configs.items():
                rows.append((model, SIZES[model], name, " ".join(options), statistics.median(rates[name]),
                             min(rates[name]), max(rates[name]), statistics.median(walls[name])))
    load = os.getloadavg()
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), platform.processor())
    lines = ["# `pipeline predict` throughput: float SavedModel batched vs int8 TFLite", "",
             f"- date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}",
             f"- command: `.venv/bin/python bench/edge/predict.py --images {args.images} --rounds {args.rounds} --models {args.models}`",
             f"- machine: {cpu}, {os.cpu_count()} cores (shared with other work; load average {load[0]:.1f} at the end), "
             f"Python {platform.python_version()}, {platform.machine()}",
             f"- data: {args.images} Kaggle-schema test records (224x224 JPEGs cropped from scikit-learn's photos, no `class`), "
             "4 shards; each model trained 1 epoch (weights=None) and exported with `--int8`",
             "- each predict: `pipeline predict RUN --data 'test/*.tfrec' --out out.csv OPTIONS`, a fresh process; "
             f"{args.rounds} rounds, configurations interleaved within each round",
             "- images/s: what predict prints (reading + decoding + scoring; model load excluded); wall: the whole command", "",
             "| model | input | configuration | options | images/s median | min | max | wall s (median) |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    for model, size, name, options, median, low, high, wall in rows:
        lines.append(f"| {model} | {size} | {name} | `{options}` | {median:.1f} | {low:.1f} | {high:.1f} | {wall:.1f} |")
    lines.append("")
    for model in args.models.split(","):
        by = {name: median for m, _, name, _, median, _, _, _ in rows if m == model}
        best_float = max(v for k, v in by.items() if k.startswith("float"))
        best_int8 = max(v for k, v in by.items() if k.startswith("int8"))
        lines.append(f"- {model}: best int8 / best float = {best_int8 / best_float:.2f}")
    text = "\n".join(lines) + "\n"
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
