"""QAT fine-tunes at the global batch `pipeline train` recorded, and refuses a manifest without one; distillation
learns the float model's softened scores on the training images outside the ladder's tuning split."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.host


def test_qat_uses_the_recorded_global_batch(exported_run, monkeypatch):
    import tf_keras as keras

    from pipeline.quant import qat
    from pipeline.rundir.run import Run

    run = Run.open(exported_run)
    manifest = run.manifest
    assert manifest["training"]["global_batch"] == 32  # train's default; QAT used to fall back to 64
    seen = {}

    def fake_fit(self, *args, **kwargs):
        seen["batch_size"] = kwargs.get("batch_size")

    monkeypatch.setattr(keras.Model, "fit", fake_fit)
    qat.fine_tune(run, epochs=1)
    assert seen == {"batch_size": 32}


def test_qat_traces_its_training_step_once(exported_run):
    """A step that makes variables (a metric made from its name in the first step) is traced twice."""
    from pipeline.quant import qat
    from pipeline.rundir.run import Run

    model = qat.fine_tune(Run.open(exported_run), epochs=1)
    assert model.train_function.experimental_get_tracing_count() == 1


def test_distillation_fits_the_float_models_softened_scores_on_views_outside_the_tuning_split(exported_run, monkeypatch):
    import numpy as np
    import tf_keras as keras

    from pipeline.data import load_split
    from pipeline.quant import qat
    from pipeline.rundir.run import Run

    run = Run.open(exported_run)
    images, _ = load_split(run, "train")
    exclude = (0, 5, 7)
    seen = {}

    def fake_fit(self, inputs, targets, **kwargs):
        seen.update(inputs=inputs, targets=targets, batch_size=kwargs.get("batch_size"))

    monkeypatch.setattr(keras.Model, "fit", fake_fit)
    student = qat.distil(run, epochs=1, exclude=exclude)
    kept = len(images) - len(exclude)
    assert len(seen["inputs"]) == kept * qat.DISTIL_VIEWS and seen["batch_size"] == run.global_batch
    # The images themselves first (the excluded ones left out), then the views.
    np.testing.assert_array_equal(seen["inputs"][:kept], np.delete(images, exclude, axis=0).astype(np.float32))
    teacher = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    scores = teacher.predict(seen["inputs"], verbose=0)
    targets = seen["targets"]
    np.testing.assert_allclose(targets.sum(1), 1.0, atol=1e-5)
    assert (targets.argmax(1) == scores.argmax(1)).all()
    assert targets.max(1).mean() < scores.max(1).mean()  # softened: the runner-up classes carry weight
    # BatchNorm is frozen in the student (its statistics are the float model's); the rest trains.
    norms = [layer for layer in student.layers if isinstance(getattr(layer, "layer", layer), keras.layers.BatchNormalization)]
    assert all(not getattr(n, "layer", n).trainable for n in norms) and student.trainable_variables


@pytest.mark.parametrize("training", [{}, {"global_batch": 0}, {"global_batch": "32"}, {"batch_size": 64}])
def test_qat_refuses_a_manifest_without_the_global_batch(exported_run, training):
    from pipeline.errors import ManifestError
    from pipeline.quant import qat
    from pipeline.rundir.run import Run

    run = Run.open(exported_run)
    run.manifest = dict(run.manifest, training=training)
    with pytest.raises(ManifestError, match="training.global_batch .*expected the positive global batch"):
        qat.fine_tune(run, epochs=1)


@pytest.mark.slow  # builds a Keras application of its own and fine-tunes it (docs/testing.md)
def test_qat_wraps_a_nested_keras_application_after_flattening_it():
    """MobileNetV2's base is one `Functional` layer of the registry's model, which tfmot refuses to annotate; the
    flattened copy answers exactly as the nested model does and every convolution gets a quantize wrapper."""
    import numpy as np
    import tf_keras as keras

    from models import registry
    from pipeline.quant import flatten, qat

    model = registry.build("mobilenet_v2", 3, 32, alpha=0.35)
    rng = np.random.default_rng(0)
    for layer in model.get_layer(index=2).layers:  # trained-looking BatchNorm statistics, not the identity ones
        if isinstance(layer, keras.layers.BatchNormalization):
            n = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.normal(0, 0.3, n)), layer.moving_variance.assign(rng.uniform(0.3, 2, n))
    assert flatten.is_nested(model)
    flat = flatten.flatten(model)
    assert not flatten.is_nested(flat) and flat.count_params() == model.count_params()
    images = rng.integers(0, 256, (4, 32, 32, 3)).astype(np.float32)
    np.testing.assert_allclose(flat.predict(images, verbose=0), model.predict(images, verbose=0), atol=1e-5)
    qat_model = qat.quantize_aware(model)
    convs = [l for l in flat.layers if isinstance(l, (keras.layers.Conv2D, keras.layers.DepthwiseConv2D, keras.layers.Dense))]
    wrapped = [l for l in qat_model.layers if type(l).__name__ == "QuantizeWrapperV2"]
    assert len(convs) > 50 and len(wrapped) >= len(convs)
    assert qat_model.predict(images, verbose=0).shape == (4, 3)


@pytest.mark.slow  # builds a Keras application of its own and fine-tunes it (docs/testing.md)
def test_qat_wraps_efficientnet_with_its_normalization_and_squeeze_excite():
    """tfmot's default scheme refuses EfficientNet's Normalization and the squeeze-excite Multiply; each gets an
    output quantizer alone, so the model can be wrapped, and the wrapped model runs."""
    import numpy as np

    from models import registry
    from pipeline.quant import flatten, qat

    model = registry.build("efficientnet_b0", 3, 32)
    qat_model = qat.quantize_aware(model)
    kinds = {type(l.layer).__name__ for l in qat_model.layers if type(l).__name__ == "QuantizeWrapperV2"}
    assert {"Normalization", "Multiply", "Rescaling", "Conv2D", "DepthwiseConv2D"} <= kinds
    assert len(qat_model.layers) == len(flatten.flatten(model).layers) + 1  # + tfmot's input QuantizeLayer
    images = np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3)).astype(np.float32)
    scores = qat_model(images, training=False).numpy()
    assert scores.shape == (4, 3) and np.all(np.isfinite(scores))
