"""How much held-out accuracy moves between seeds and data forms, and with the size of a BatchNorm estimate.

    .venv/bin/python bench/training/batchnorm_seeds.py      writes bench/results/batchnorm_seeds.md

The issue-20 photo folders (tests/support/helpers.py write_camera_jpegs(halves=True): 4 classes, 240
training and 80 held-out 640x480 JPEGs) and their `pipeline prepare` TFRecords. MobileNetV2 0.35
and MobileNetV3 Small at 96 px, 15 epochs from scratch, seeds 1234 (the default), 1 and 2, on
both forms: held-out accuracy per epoch. The two forms hold the same bytes but feed the examples
in another order, so their runs differ as two seeds do. Then, on each folder run's saved model,
the statistics re-estimated again with 7, 28 and 64 batches of 32, four shuffles each: how much
the estimate alone moves held-out accuracy. This is what the epochs in tests/pipeline/training/test_batchnorm.py
were chosen from.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS = (("mobilenet_v2", {"alpha": 0.35}), ("mobilenet_v3_small", {}))
SEEDS = (1234, 1, 2)
EPOCHS = 15
ESTIMATE_BATCHES = (7, 28, 64)
SHUFFLES = 4


def train_one(spec: list) -> None:
    """In a fresh process: one training run."""
    model, options, seed, train_spec, val_spec, out = spec
    sys.path.insert(0, str(REPO))
    from pipeline import train

    train.train_model(train.TrainConfig(data=train_spec, val_data=val_spec, model=model, image_size=96, seed=seed,
                                model_options=tuple(sorted(options.items())), epochs=EPOCHS), Path(out))


def estimate_noise(run: str, batch_counts=ESTIMATE_BATCHES) -> dict:
    """In a fresh process: held-out accuracy of the run's saved model after re-estimating its statistics
    with each batch count and shuffle, from the run's training split."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    sys.path.insert(0, str(REPO))
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from pipeline import data as data_mod
    from pipeline.rundir.run import Run
    from pipeline.training import batchnorm

    recorded = Run.open(Path(run))
    model = keras.models.load_model(str(recorded.artifact("keras_model")))
    images, labels = data_mod.load_split(recorded, "heldout")
    size = recorded.image_size
    train_source, train_indices = data_mod.resolve_split(recorded, "train")
    train_ds = train_source.training_dataset(size, train_indices)

    def correct() -> int:
        return int((model.predict(images.astype(np.float32), verbose=0).argmax(1) == labels).sum())

    out = {"saved": correct()}
    for batches in batch_counts:
        out[batches] = []
        for shuffle in range(SHUFFLES):
            batchnorm.Reestimator(model, tf.distribute.get_strategy(),
                                  data_mod.training_pipeline(train_ds, 32, 100 + shuffle), batches, 32)()
            out[batches].append(correct())
    return out


def _python(*args) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, __file__, *args], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if done.returncode != 0:
        raise SystemExit(f"{args[:1]} failed:\n{done.stderr[-3000:]}")
    return done


def main() -> None:
    sys.path.insert(0, str(REPO))
    from pipeline import prepare
    from tests.support.helpers import write_camera_jpegs

    histories, noise = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        forms = {"folder": {}, "tfrecord": {}}
        for split, per_class, seed in (("train", 60, 0), ("val", 20, 1)):
            folder = write_camera_jpegs(tmp / split, per_class=per_class, seed=seed, halves=True)
            prepare.write_shards(prepare.PrepareConfig(), str(folder), str(tmp / f"{split}_tfrec"))
            forms["folder"][split], forms["tfrecord"][split] = str(folder), str(tmp / f"{split}_tfrec" / "*.tfrec")
        for model, options in MODELS:
            for seed in SEEDS:
                for form, specs in forms.items():
                    out = tmp / f"{model}-{form}-{seed}"
                    _python("--train", json.dumps([model, options, seed, specs["train"], specs["val"], str(out)]))
                    histories[(model, seed, form)] = [e["val_accuracy"] for e in json.loads((out / "history.json").read_text())]
                noise[(model, seed)] = json.loads(_python("--noise", str(tmp / f"{model}-folder-{seed}")).stdout.splitlines()[-1])
    write(histories, noise)


def write(histories, noise) -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), platform.processor())
    lines = ["# BatchNorm statistics: spread between seeds, data forms and estimates", "",
             "Command: `.venv/bin/python bench/training/batchnorm_seeds.py`  ",
             f"Machine: {cpu}, {os.cpu_count()} CPUs shared with other jobs, Python {platform.python_version()}", "",
             f"Photo folders (4 classes, 240 training and 80 held-out 640x480 JPEGs) and their TFRecords; "
             f"96 px, {EPOCHS} epochs from scratch, statistics re-estimated before every validation. Held-out accuracy "
             "per epoch (80 images: 0.0125 is one image).", ""]
    for model, _ in MODELS:
        lines += [f"## {model}", "", "| seed | form | " + " | ".join(str(e) for e in range(1, EPOCHS + 1)) + " |",
                  "|---|---|" + "---|" * EPOCHS]
        for seed in SEEDS:
            for form in ("folder", "tfrecord"):
                lines.append(f"| {seed} | {form} | " + " | ".join(f"{a:.3f}" for a in histories[(model, seed, form)]) + " |")
        apart = [round(abs(histories[(model, s, "folder")][-1] - histories[(model, s, "tfrecord")][-1]) * 80) for s in SEEDS]
        lines += ["", f"Folder vs TFRecord after {EPOCHS} epochs, images apart: " + ", ".join(
            f"seed {s}: {a}" for s, a in zip(SEEDS, apart)), "",
                  "Re-estimating the folder run's saved statistics again (held-out images right, of 80; four shuffles each):", "",
                  "| seed | as saved | " + " | ".join(f"{b} batches" for b in ESTIMATE_BATCHES) + " |",
                  "|---|---|" + "---|" * len(ESTIMATE_BATCHES)]
        for seed in SEEDS:
            n = noise[(model, seed)]
            lines.append(f"| {seed} | {n['saved']} | " + " | ".join(", ".join(map(str, n[str(b)])) for b in ESTIMATE_BATCHES) + " |")
        lines.append("")
    out = REPO / "bench" / "results" / "batchnorm_seeds.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--train":
        train_one(json.loads(sys.argv[2]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "--noise":  # --noise RUN [BATCHES...]: that run's spread alone
        print(json.dumps(estimate_noise(sys.argv[2], [int(b) for b in sys.argv[3:]] or ESTIMATE_BATCHES)))
    else:
        main()
