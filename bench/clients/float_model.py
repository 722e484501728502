"""The float Keras model of a run fed as the clients feed its int8 model: does a client's resize cost the float
model too, or only the int8 one? And a calibration set fed as the clients feed, for `export --calibration-data`.

    .venv/bin/python bench/clients/float_model.py score RUN HELDOUT_FOLDER
    .venv/bin/python bench/clients/float_model.py calibration TRAIN_FOLDER SIZE OUT.npy

`score` prints the float model's top-1 on the held-out JPEGs (a folder of class folders) as MediaPipe and pycoral
feed them (edge.clients.feeds' reproductions) and stretched with Pillow's antialiased bilinear.
`calibration` writes every training JPEG three times (MediaPipe's feed, LANCZOS, antialiased bilinear) as uint8.
"""
from __future__ import annotations

import glob
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from edge.clients import feeds as clients  # noqa: E402
from pipeline.quant import convention  # noqa: E402


def _details(size: int) -> dict:
    # A uint8 input on Coral's grid, as the int8 models have: both clients then hand the pixels over as they are.
    return {"dtype": np.uint8, "shape": np.array([1, size, size, 3]),
            "quantization": (convention.SCALE, convention.ZERO_POINT["uint8"])}


def feeds(size: int) -> dict:
    return {"mediapipe": lambda path: clients.mediapipe_classify(path, _details(size))[0],
            "pycoral": lambda path: clients.pycoral_classify(path, _details(size))[0],
            "bilinear_aa": lambda path: np.asarray(Image.open(path).convert("RGB").resize((size, size), Image.BILINEAR))}


def _jpegs(folder: str) -> list:
    return sorted(glob.glob(os.path.join(folder, "*", "*.jpg")))


def score(run: str, heldout: str) -> None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tf_keras as keras

    model = keras.models.load_model(os.path.join(run, "keras_model.keras"), compile=False)
    labels = open(os.path.join(run, "labels.txt")).read().split()
    files = _jpegs(heldout)
    truth = np.array([labels.index(os.path.basename(os.path.dirname(f))) for f in files])
    for name, feed in feeds(model.input_shape[1]).items():
        answers = model.predict(np.stack([feed(f) for f in files]).astype(np.float32), verbose=0).argmax(1)
        print(f"{name:12s} float top-1 {np.mean(answers == truth):.4f} ({len(files)} images)")


def calibration(train: str, size: int, out: str) -> None:
    files = _jpegs(train)
    images = [feed(f) for feed in feeds(size).values() for f in files]
    np.save(out, np.stack(images).astype(np.uint8))
    print(f"wrote {out}: {len(images)} images")


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] not in ("score", "calibration"):
        sys.exit(__doc__)
    if sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3])
    else:
        calibration(sys.argv[2], int(sys.argv[3]), sys.argv[4])
