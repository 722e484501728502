"""The model registry: raw-pixel inputs, float32 scores, local weights, clear errors."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.host


@pytest.mark.parametrize("name, size, options", [("small_cnn", 16, {}), ("mobilenet_v2", 32, {"alpha": 0.35})])
def test_models_take_raw_pixels_and_give_probabilities(name, size, options):
    import models

    model = models.build(name, 5, size, **options)
    assert any(layer.name == "preprocess" for layer in model.layers)  # carries its own preprocessing
    scores = model(np.full((2, size, size, 3), 255.0, np.float32)).numpy()
    assert scores.shape == (2, 5) and scores.dtype == np.float32
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_efficientnet_takes_raw_pixels_through_its_own_first_layers():
    """Keras' EfficientNet normalizes 0..255 pixels itself, as its ImageNet weights expect: no preprocess layer."""
    import tf_keras as keras

    import models

    model = models.build("efficientnet_b0", 4, 32)
    assert not any(layer.name == "preprocess" for layer in model.layers)
    base = next(layer for layer in model.layers if isinstance(layer, keras.Model))
    first = [type(layer).__name__ for layer in base.layers[1:3]]
    assert first == ["Rescaling", "Normalization"] and base.layers[1].scale == 1.0 / 255.0
    assert models.in_model_preprocessing("efficientnet_b0").startswith("Keras EfficientNet's Rescaling(1/255)")
    assert models.in_model_preprocessing("mobilenet_v2").startswith("Rescaling(1/127.5, offset=-1)")  # the manifest says
    assert any(layer.name.endswith("se_excite") for layer in base.layers)  # squeeze-excite, not a lookalike
    scores = model(np.full((2, 32, 32, 3), 255.0, np.float32)).numpy()
    assert scores.shape == (2, 4) and scores.dtype == np.float32
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["small", "large"])
def test_mobilenet_v3_minimalistic_switch(kind):
    """Default (1): the minimalistic model, as before the option; 0: hard-swish and squeeze-excite."""
    import tf_keras as keras

    import models

    def base_layers(**options):
        model = models.build(f"mobilenet_v3_{kind}", 3, 32, **options)
        base = next(layer for layer in model.layers if isinstance(layer, keras.Model))
        # Kinds and weight shapes: some layer names count the models built so far.
        return [(type(layer).__name__, [w.shape for w in layer.weights]) for layer in base.layers]

    default, minimalistic, full = base_layers(), base_layers(minimalistic=1), base_layers(minimalistic=0)
    assert default == minimalistic
    assert ("Multiply", []) not in default  # no squeeze-excite, no hard-swish
    assert ("Multiply", []) in full and len(full) > len(default)


@pytest.mark.parametrize("value", [2, 0.5, -1])
def test_minimalistic_takes_only_0_or_1(value):
    import models

    with pytest.raises(ValueError, match=f"minimalistic={value} for mobilenet_v3_large, expected 0 or 1"):
        models.check_options("mobilenet_v3_large", {"minimalistic": value})


def test_local_weights_are_loaded(tmp_path):
    import models

    trained = models.build("small_cnn", 4, 16)
    path = tmp_path / "small_cnn.weights.h5"
    trained.save_weights(str(path))
    loaded = models.build("small_cnn", 4, 16, weights=path)
    fresh = models.build("small_cnn", 4, 16)
    for a, b in zip(trained.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(trained.get_weights(), fresh.get_weights()))


@pytest.mark.slow
def test_base_network_weights_for_transfer_learning(tmp_path):
    import tf_keras as keras

    import models

    base = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, include_top=False, weights=None)
    path = tmp_path / "mobilenet_v2_no_top.h5"
    base.save_weights(str(path))
    model = models.build("mobilenet_v2", 3, 32, weights=path, alpha=0.35)
    inner = next(l for l in model.layers if isinstance(l, keras.Model))
    for a, b in zip(base.get_weights(), inner.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_bad_requests_are_named():
    import models

    with pytest.raises(ValueError, match="unknown model 'vgg'; expected one of small_cnn"):
        models.build("vgg", 3)
    with pytest.raises(ValueError, match="image size 40 is too small for xception; expected at least 71"):
        models.build("xception", 3, 40)
    with pytest.raises(FileNotFoundError, match="weights file"):
        models.build("small_cnn", 3, 16, weights="/nonexistent/w.h5")


@pytest.mark.parametrize("name, options, named", [
    ("small_cnn", {"alpha": 0.5}, "takes width, dropout"),
    ("mobilenet_v2", {"alhpa": 0.5}, "takes alpha, dropout"),
    ("xception", {"alpha": 0.5, "width": 8}, "options 'alpha', 'width'; it takes dropout"),
])
def test_options_a_model_does_not_take_are_refused(name, options, named):
    import models

    with pytest.raises(ValueError, match=f"model {name} does not take .*{named}"):
        models.build(name, 3, 75, **options)


def test_option_values_must_be_numbers():
    import models

    with pytest.raises(ValueError, match="alpha='wide' for mobilenet_v2, expected a number"):
        models.check_options("mobilenet_v2", {"alpha": "wide"})


@pytest.mark.parametrize("content", [b"\x00\x01junk" * 100, b"not weights, just a text file\n"])
def test_junk_weights_file_is_named(tmp_path, content):
    import models

    path = tmp_path / "w.h5"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"weights file .*w\.h5 is not an HDF5 file .*expected Keras weights"):
        models.build("small_cnn", 3, 16, weights=path)


def test_weights_of_another_model_are_named(tmp_path):
    import models

    path = tmp_path / "other.weights.h5"
    models.build("small_cnn", 4, 16, width=8).save_weights(str(path))
    with pytest.raises(ValueError, match=r"weights file .*other\.weights\.h5 does not fit small_cnn"):
        models.build("small_cnn", 4, 16, weights=path)


def test_train_help_names_every_registry_model():
    """The --model help is written out by hand (the training config does not import the registry, which imports
    TensorFlow): a model added to the registry must be added there too."""
    from click.testing import CliRunner

    import models
    from pipeline import cli

    result = CliRunner().invoke(cli.main, ["train", "--help"])
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    missing = [name for name in models.MODEL_NAMES if name not in words]
    assert not missing, f"pipeline train --help does not name {missing}"
