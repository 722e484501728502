"""How far training's tf.data preprocessing is from the pixel contract (edge.pixels.preprocess), on real photos.

    .venv/bin/python bench/training/pixel_contract.py > bench/results/pixel_contract.md

Photos (contract version 2, reduced-scale JPEG decoding on both sides): scikit-learn's two 640x427 JPEGs, and 640x480 camera-style JPEG crops made from them
(tests/helpers.write_camera_jpegs). For each, at the model sizes 32, 128 and 224: the mean and
the largest absolute difference in grey levels between the contract's pixels (Pillow, what the
device computes) and (a) training's pipeline as it is (pipeline.data.training_pixels), (b) the
TensorFlow defaults the pipeline used before (fast DCT, bilinear without antialiasing).
Target for (a): mean <= 1.5 grey levels. Deterministic: no timing, so the machine does not matter
for the numbers, only the library versions.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

TARGET = 1.5
SIZES = (32, 128, 224)


def tensorflow_defaults(raw: bytes, size: int) -> np.ndarray:
    import tensorflow as tf

    image = tf.image.resize(tf.io.decode_image(raw, channels=3, expand_animations=False), [size, size], method="bilinear")
    return np.clip(np.round(image.numpy()), 0, 255).astype(np.uint8)


def main() -> None:
    import PIL
    import tensorflow as tf

    from edge.pixels.preprocess import load_pixels
    from pipeline.data import training_pixels
    from tests.support.helpers import sample_photos, write_camera_jpegs

    photos = {f"{name}.jpg (640x427)": raw for name, raw in sample_photos().items()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_camera_jpegs(Path(tmp), per_class=3)
        for path in sorted(folder.glob("*/*.jpg")):
            photos[f"{path.parent.name}/{path.name} (640x480 crop)"] = path.read_bytes()

    print("# Training preprocessing vs the pixel contract\n")
    print("Command: `.venv/bin/python bench/training/pixel_contract.py > bench/results/pixel_contract.md`\n")
    print(f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}; Python {platform.python_version()}, "
          f"TensorFlow {tf.__version__}, Pillow {PIL.__version__}. No timing: the numbers depend on the libraries only.\n")
    print("Grey levels (0..255), all pixels and channels of each photo at model size. "
          f"Target for training's pipeline: mean <= {TARGET}.\n")
    print("| photo | size | training pipeline: mean | max | TensorFlow defaults (before): mean | max |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for name, raw in photos.items():
        for size in SIZES:
            contract = load_pixels(raw, (size, size)).astype(np.int64)
            now = np.abs(training_pixels(raw, size).astype(np.int64) - contract)
            before = np.abs(tensorflow_defaults(raw, size).astype(np.int64) - contract)
            worst = max(worst, now.mean())
            print(f"| {name} | {size} | {now.mean():.3f} | {now.max()} | {before.mean():.2f} | {before.max()} |")
    print(f"\nWorst mean for training's pipeline: {worst:.3f} grey levels: "
          f"{'meets' if worst <= TARGET else 'MISSES'} the target of {TARGET}.")


if __name__ == "__main__":
    main()
