"""`edge evaluate` on the run's own float model alone in a folder (no sidecar, no manifest, no metadata) feeds it
raw pixels, as `edge.answers.classify.set_input` does, and so answers as the float model does.

Before, the fallback was pycoral's mean 128 / std 128, which turns the raw-pixel float input into values in
[-1, 1): the digits model answered "1" for every image. The float model here is converted from the run's
SavedModel by the export stage's own conversion without its metadata step (a model with metadata would be fed
by its metadata). The reference answers come from TensorFlow's interpreter fed the raw pixels by hand.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.host

IMAGES = 300  # digits images scored, every sixth of scikit-learn's 1,797


def _float_model_without_metadata(run_dir):
    from pipeline.quant.convert import Mode, convert, make_converter, serving_function
    from pipeline.rundir.run import Run

    image_size = Run.open(run_dir).image_size
    concrete, trackable = serving_function(run_dir / "saved_model", image_size)
    return convert(make_converter(concrete, trackable, Mode.FLOAT32, None, None)), image_size


def _digits(size):
    """(uint8 [N, size, size, 3] digits as camera-like RGB pixels, their labels), resized by Pillow."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    chosen = np.arange(0, len(digits.target), len(digits.target) // IMAGES)[:IMAGES]
    pixels = np.round(digits.images[chosen] * (255.0 / 16.0)).astype(np.uint8)
    rgb = [np.asarray(Image.fromarray(np.repeat(p[..., None], 3, axis=-1)).resize((size, size), Image.BILINEAR))
           for p in pixels]
    return np.stack(rgb), digits.target[chosen]


def _reference_answers(model_bytes, images):
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_content=model_bytes)
    interpreter.allocate_tensors()
    inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    assert inp["dtype"] == np.float32
    answers = []
    for image in images:
        interpreter.set_tensor(inp["index"], image[None].astype(np.float32))
        interpreter.invoke()
        answers.append(int(np.argmax(interpreter.get_tensor(out["index"])[0])))
    return np.array(answers)


def test_float_model_alone_gets_raw_pixels_and_answers_as_the_float_model(exported_run, tmp_path):
    from click.testing import CliRunner
    from PIL import Image

    from edge.cli import main
    from edge.model.metadata import read_metadata

    model_bytes, size = _float_model_without_metadata(exported_run)
    alone = tmp_path / "alone"
    alone.mkdir()
    model = alone / "model_float.tflite"
    model.write_bytes(model_bytes)
    meta = read_metadata(model_bytes)
    assert meta.mean is None and meta.std is None  # nothing tells edge how to feed it
    images, labels = _digits(size)
    data = tmp_path / "digits"
    for i, (image, label) in enumerate(zip(images, labels)):
        folder = data / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{i:04d}.png")  # PNG: lossless, already at the model's size

    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(main, ["evaluate", str(model), "--data", str(data), "--out", str(tmp_path / "p.json")])
    assert result.exit_code == 0, result.output + result.stderr
    assert "raw pixels 0..255: a float input with no recorded pixel contract" in result.stderr
    document = json.loads((tmp_path / "p.json").read_text())
    got = {p["file"]: int(np.argmax(p["scores"])) for p in document["predictions"]}
    assert len(got) == IMAGES

    reference = _reference_answers(model_bytes, images)
    edge_answers = np.array([got[f"{label}/{i:04d}.png"] for i, label in enumerate(labels)])
    assert (edge_answers == reference).all(), f"{int((edge_answers != reference).sum())} of {IMAGES} answers differ"
    accuracy = float((reference == labels).mean())
    assert document["top1_accuracy"] == pytest.approx(accuracy)
    majority = np.bincount(labels).max() / len(labels)
    assert accuracy > majority + 0.2 and len(set(edge_answers.tolist())) > 5, (accuracy, set(edge_answers.tolist()))


def test_flags_still_choose_the_normalization(exported_run, tmp_path):
    """--input-mean/--input-std still apply to a model with no record or metadata, float or not."""
    from edge.answers.runner import Runner

    model_bytes, _ = _float_model_without_metadata(exported_run)
    model = tmp_path / "model_float.tflite"
    model.write_bytes(model_bytes)
    said = []
    runner = Runner.open(model, mean=[128.0], std=[128.0], say=said.append)
    assert runner.contract.norm.mean == (128.0,) * 3 and runner.contract.norm.std == (128.0,) * 3
    assert any("--input-mean/--input-std" in line for line in said)
