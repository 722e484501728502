"""A detector trained for a minute on `shapes` with the plain loop (pipeline.detection.train_loop) at 128 px and
exported both ways by hand: what the client tests (test_detect_clients) run on. Calibrated on training images; the
held-out images written as PNG files, as a user would hand them to a client.

Not yet the session's `pipeline train` detector (tests/detect_trained.py): on that one, parity's pycoral row and
the real pycoral (Pillow 13 on the host, 11.3 in the device venv: LANCZOS differs by a few grey levels) pick
different boxes of a near tie on one letterboxed 16:9 picture, which the client test's tolerance does not allow.

`trained_once(root)` trains it once per pytest session for every xdist worker (tests/session_cache.py)."""
from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tests.session_cache import built_once

SIZE = 128  # at 64 px objects are a few pixels and a minute of training finds almost none
STEPS = 400
SOURCE = {"count": 300, "size": SIZE, "seed": 0}  # the `shapes` images trained on and held out
WEIGHTS = "detector.weights.h5"  # the Keras model's weights, for the tests that run Keras itself


def train_and_export(folder: Path, steps: int = STEPS) -> SimpleNamespace:
    """Train, convert to float and int8 TFLite with the post-processing op, write both and the held-out images."""
    import tensorflow as tf
    from PIL import Image

    from pipeline.detection.anchors import AnchorSpec, anchors
    from pipeline.detection.postprocess import Settings, convert
    from pipeline.detection.shapes import CLASSES
    from pipeline.detection.train_loop import fit

    train, heldout = _split()
    spec = AnchorSpec()
    tf.keras.utils.set_random_seed(0)
    model = _build(spec)
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
    model.save_weights(str(folder / WEIGHTS))
    return SimpleNamespace(model=model, spec=spec, labels=list(CLASSES), settings=settings, heldout=heldout,
                           files=files, float=paths["float"], int8=paths["int8"], calibration=calibration)


def trained_once(root: Path, keras: bool = True) -> SimpleNamespace:
    """The detector of `train_and_export`, trained by the first caller in this pytest session (ROOT is the
    session's shared folder) and loaded from its files by every caller. KERAS=False leaves out the Keras model
    (`model` is None) for callers that run only the exported files."""
    return load(built_once(root / "plain_detector", train_and_export), keras)


def load(folder: Path, keras: bool = True) -> SimpleNamespace:
    """What `train_and_export` returned, from the files it wrote to FOLDER (the Keras model rebuilt, its weights
    loaded; the held-out examples drawn again from the same seed and checked against the PNG files)."""
    from pipeline.detection.anchors import AnchorSpec
    from pipeline.detection.postprocess import Settings
    from pipeline.detection.shapes import CLASSES

    _, heldout = _split()
    files = [folder / "heldout" / (e.id.replace("/", "_") + ".png") for e in heldout]
    for e, path in zip(heldout, files):  # the same images the cache was written from, byte for byte
        assert path.read_bytes() == e.image, f"{path} is not held-out image {e.id} of {SOURCE}"
    spec = AnchorSpec()
    model = None
    if keras:
        model = _build(spec)
        model.load_weights(str(folder / WEIGHTS))
    return SimpleNamespace(model=model, spec=spec, labels=list(CLASSES), settings=Settings(), heldout=heldout,
                           files=files, float=folder / "detector_float.tflite", int8=folder / "detector_int8.tflite")


def _split():
    from pipeline.detection.shapes import shapes

    source = shapes(**SOURCE)
    return ([source.examples[i] for i in source.indices("train")],
            [source.examples[i] for i in source.indices("heldout")])


def _build(spec):
    from models.detector import build_detector
    from pipeline.detection.shapes import CLASSES

    return build_detector("small_cnn", SIZE, len(CLASSES), spec.per_location)
