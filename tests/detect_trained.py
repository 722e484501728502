"""A detector trained for a minute on `shapes` and exported both ways: what the detection export and client
tests run on. Trained with the plain loop (pipeline.detection.train_loop) at 128 px; calibrated on training
images; the held-out images written as PNG files, as a user would hand them to a client."""
from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import numpy as np

SIZE = 128  # at 64 px objects are a few pixels and a minute of training finds almost none
STEPS = 400


def train_and_export(folder: Path, steps: int = STEPS) -> SimpleNamespace:
    """Train, convert to float and int8 TFLite with the post-processing op, write both and the held-out images."""
    import tensorflow as tf
    from PIL import Image

    from models.detector import build_detector
    from pipeline.detection.anchors import AnchorSpec, anchors
    from pipeline.detection.postprocess import Settings, convert
    from pipeline.detection.shapes import CLASSES, shapes
    from pipeline.detection.train_loop import fit

    source = shapes(300, size=SIZE, seed=0)
    train = [source.examples[i] for i in source.indices("train")]
    heldout = [source.examples[i] for i in source.indices("heldout")]
    spec = AnchorSpec()
    tf.keras.utils.set_random_seed(0)
    model = build_detector("small_cnn", SIZE, len(CLASSES), spec.per_location)
    fit(model, train, anchors(SIZE, spec), SIZE, steps=steps, batch_size=16)
    calibration = [np.asarray(Image.open(io.BytesIO(e.image)).convert("RGB").resize((SIZE, SIZE), Image.BILINEAR))
                   for e in train[:100]]
    settings = Settings()
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, int8 in (("float", False), ("int8", True)):
        data = convert(model, spec, SIZE, CLASSES, settings, int8=int8, calibration=calibration if int8 else None)
        paths[name] = folder / f"detector_{name}.tflite"
        paths[name].write_bytes(data)
    images = folder / "heldout"
    images.mkdir(exist_ok=True)
    files = []
    for e in heldout:
        path = images / (e.id.replace("/", "_") + ".png")
        path.write_bytes(e.image)
        files.append(path)
    return SimpleNamespace(model=model, spec=spec, labels=list(CLASSES), settings=settings, heldout=heldout,
                           files=files, float=paths["float"], int8=paths["int8"], calibration=calibration)
