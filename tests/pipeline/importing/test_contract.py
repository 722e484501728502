"""The imported model's input contract (pipeline/importing/contract.py) and the input preparation the wrapper puts in
the graph (wrap.py): facts read from the model, options asked for what it does not say, contradictions refused, and
the graph's preparation equal to the reference's NumPy one. Fast: no model is loaded."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.errors import ConfigError
from pipeline.importing.contract import Given, ModelInput, resolve

pytestmark = pytest.mark.host


def test_what_the_model_says_is_read_and_the_rest_asked():
    nchw = ModelInput("input", [1, 3, 64, 64], "float32")
    contract = resolve(nchw, Given(value_range=(0.0, 1.0)), "m.onnx")
    assert (contract.image_size, contract.layout) == (64, "nchw")
    assert contract.norm.mean == (0.0,) * 3 and contract.norm.std == (255.0,) * 3
    assert resolve(nchw, Given(value_range=(-1.0, 1.0)), "m").norm.mean == (127.5,) * 3
    own = ModelInput("x", [None, 32, 32, 3], "float32", normalizes="Rescaling layer 'r'")
    assert resolve(own, Given(), "m.keras").norm.std == (1.0,) * 3
    with pytest.raises(ConfigError, match="does not say how its input is normalized"):
        resolve(nchw, Given(), "m.onnx")
    with pytest.raises(ConfigError, match="could be NHWC or NCHW"):
        resolve(ModelInput("x", [1, 3, 3, 3], "float32"), Given(mean=(0.0,), std=(1.0,)), "m")
    assert resolve(ModelInput("x", [1, 3, 3, 3], "float32"), Given(mean=(0.0,), std=(1.0,), layout="nchw"), "m").layout == "nchw"


def test_contradictions_and_impossible_options_are_refused():
    model = ModelInput("x", [None, 32, 32, 3], "float32")
    for given, words in ((Given(image_size=48, mean=(0.0,), std=(1.0,)), "contradicts"),
                         (Given(mean=(0.0,), std=(1.0,), fit="letterbox"), "expected --fit stretch"),
                         (Given(mean=(1.0,)), "go together"),
                         (Given(mean=(0.0,), std=(0.0,)), "positive"),
                         (Given(value_range=(1.0, 0.0)), "LOW < HIGH"),
                         (Given(value_range=(0.0, 1.0), mean=(0.0,), std=(1.0,)), "both given")):
        with pytest.raises(ConfigError, match=words):
            resolve(model, given, "m")
    with pytest.raises(ConfigError, match="square"):
        resolve(ModelInput("x", [1, 32, 48, 3], "float32"), Given(mean=(0.0,), std=(1.0,)), "m")
    with pytest.raises(ConfigError, match="expected a float image input"):
        resolve(ModelInput("x", [1, 32, 32, 3], "uint8"), Given(mean=(0.0,), std=(1.0,)), "m")


def test_the_graph_prepares_pixels_as_the_reference_does():
    import tensorflow as tf

    from pipeline.importing.wrap import prepare

    pixels = np.random.default_rng(0).integers(0, 256, (2, 8, 8, 3)).astype(np.float32)
    model = ModelInput("input", [1, 3, 8, 8], "float32")
    contract = resolve(model, Given(mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375), channel_order="bgr"), "m")
    in_numpy = prepare(pixels, contract)
    in_graph = tf.function(lambda x: prepare(x, contract))(tf.constant(pixels)).numpy()
    assert in_numpy.shape == (2, 3, 8, 8)
    np.testing.assert_allclose(in_graph, in_numpy, rtol=1e-6, atol=1e-5)
    # Blue first, then normalized by the blue channel's numbers as given (the user's, in the model's order).
    np.testing.assert_allclose(in_numpy[:, 0], (pixels[..., 2] - 123.675) / 58.395, rtol=1e-5, atol=1e-5)
