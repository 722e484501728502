"""The float weight edits the remedy ladder applies before int8 conversion (pipeline/remedy/float_edits.py), on small
Keras models with trained-looking BatchNorm statistics: equalization keeps the float function (ReLU6's cap
respected) and equalizes the pairs' weight ranges; bias correction cancels the mean shift of quantized weights."""
from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

pytestmark = pytest.mark.host


def _separable(cap, seed=0):
    """Conv -> depthwise -> BN -> ReLU/ReLU6 -> 1x1 conv -> BN, with uneven depthwise channels (as training leaves them)."""
    import tf_keras as keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)
    x = keras.layers.Conv2D(6, 3, padding="same", name="stem")(x)
    x = keras.layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw")(x)
    x = keras.layers.BatchNormalization(name="dw_bn")(x)
    x = keras.layers.ReLU(max_value=cap, name="dw_relu")(x)
    x = keras.layers.Conv2D(5, 1, use_bias=False, name="pw")(x)
    x = keras.layers.BatchNormalization(name="pw_bn")(x)
    outputs = keras.layers.Dense(4)(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs)
    rng = np.random.default_rng(seed)
    dw = model.get_layer("dw")
    dw.depthwise_kernel.assign(dw.depthwise_kernel.numpy() * np.array([0.05, 0.2, 1, 3, 8, 0.5])[None, None, :, None])
    for name in ("dw_bn", "pw_bn"):
        bn = model.get_layer(name)
        n = bn.gamma.shape[0]
        bn.gamma.assign(rng.uniform(0.5, 2, n)), bn.beta.assign(rng.uniform(-0.5, 0.5, n))
        bn.moving_mean.assign(rng.normal(0, 0.2, n)), bn.moving_variance.assign(rng.uniform(0.2, 2, n))
    images = rng.integers(0, 256, (24, 8, 8, 3)).astype(np.float32)
    return model, images


def _folded_ranges(model):
    from pipeline.remedy.float_edits import _norm_scale

    dw, dw_bn, pw, pw_bn = (model.get_layer(n) for n in ("dw", "dw_bn", "pw", "pw_bn"))
    r1 = np.abs(dw.depthwise_kernel.numpy()[:, :, :, 0]).max((0, 1)) * np.abs(_norm_scale(dw_bn))
    r2 = np.abs(pw.kernel.numpy()[0, 0] * _norm_scale(pw_bn)[None]).max(1)
    return r1, r2


def test_equalization_keeps_the_float_function_and_equalizes_relu_pairs():
    from pipeline.remedy import float_edits

    model, images = _separable(cap=None)
    edited = float_edits.apply(model, ("equalize",), images.astype(np.uint8), per_tensor=True)
    np.testing.assert_allclose(edited.predict(images, verbose=0), model.predict(images, verbose=0), rtol=1e-4, atol=1e-4)
    r1, r2 = _folded_ranges(edited)
    np.testing.assert_allclose(r1, r2, rtol=1e-5)  # ReLU is homogeneous: every channel equalized
    before = _folded_ranges(model)[0]
    assert before.max() / before.min() > 50 and r1.max() / r1.min() < before.max() / before.min() / 5


def test_equalization_leaves_a_relu6_channel_that_reaches_the_cap_alone():
    from pipeline.remedy import float_edits

    model, images = _separable(cap=6.0)
    probe = float_edits._outputs(model, [model.get_layer("dw_bn").output], images, "max")[0]
    saturated = probe >= 6.0
    assert saturated.any() and (~saturated).any(), probe  # the fixture must have both kinds of channel
    edited = float_edits.apply(model, ("equalize",), images.astype(np.uint8), per_tensor=True)
    # Exact on the calibration images although ReLU6 is not homogeneous: the cap is never moved where it clips.
    np.testing.assert_allclose(edited.predict(images, verbose=0), model.predict(images, verbose=0), rtol=1e-4, atol=1e-4)
    scale = model.get_layer("dw_bn").gamma.numpy() / edited.get_layer("dw_bn").gamma.numpy()
    np.testing.assert_allclose(scale[saturated], 1.0)
    assert not np.allclose(scale[~saturated], 1.0)


def test_bias_correction_cancels_the_mean_shift_of_per_tensor_weights():
    """With the weights quantized as the converter quantizes them, the corrected layer's mean output on the
    calibration images is the float layer's: E[Q(W) x + b'] = E[W x + b]."""
    import tf_keras as keras

    from pipeline.remedy import float_edits

    keras.utils.set_random_seed(1)
    inputs = keras.Input((6, 6, 4))
    outputs = keras.layers.Conv2D(3, 3, padding="valid", name="conv")(inputs)  # valid: every position sees real inputs
    model = keras.Model(inputs, outputs)
    conv = model.get_layer("conv")
    conv.kernel.assign(conv.kernel.numpy() * np.array([1, 40, 0.3, 5])[None, None, :, None])  # one scale for uneven rows
    images = np.random.default_rng(2).uniform(0, 3, (32, 6, 6, 4)).astype(np.float32)  # positive: a mean far from 0

    def quantized_weights(m):
        copy = keras.models.clone_model(m)
        copy.set_weights(m.get_weights())
        layer = copy.get_layer("conv")
        kernel = layer.kernel.numpy()
        layer.kernel.assign(kernel + float_edits._quantization_error(kernel, 3, per_tensor=True))
        return copy

    float_mean = model.predict(images, verbose=0).mean((0, 1, 2))
    shifted = quantized_weights(model).predict(images, verbose=0).mean((0, 1, 2))
    corrected = float_edits.apply(model, ("bias",), images, per_tensor=True)
    repaired = quantized_weights(corrected).predict(images, verbose=0).mean((0, 1, 2))
    shift = np.abs(shifted - float_mean).max()
    assert shift > 1e-2  # the rounding shift is there to remove
    # What is left is float32 summation noise over outputs of about 50: under a twentieth of the shift.
    assert np.abs(repaired - float_mean).max() < shift / 20, (shift, repaired - float_mean)


def test_an_export_with_a_float_edit_records_it_and_stays_integer_only(exported_run):
    from pipeline import export
    from pipeline.rundir.run import Run

    run = Run.open(exported_run)
    from pipeline.tasks.classify import export as classify_export

    model = classify_export.convert(export.ExportConfig(mode=export.Mode.INT8, per_tensor=True, float_edits=("bias",)), run)
    assert model.facts["float_edits"] == ["bias"]
    assert model.info is not None and model.io["input"]["dtype"] == "uint8"


def test_ranges_clip_a_heavy_tail_and_keep_a_range_without_one():
    """A heavy-tailed tensor (Student's t, 3 degrees of freedom: a few values 20-40 times the typical one) gets a
    range short of its extremes, with less int8 error than min..max; a bounded one (uniform) keeps min..max to a step."""
    from pipeline.remedy.float_edits import best_range, int8_error

    rng = np.random.default_rng(0)
    tail = rng.standard_t(3, 100_000)
    low, high = best_range(tail)
    assert tail.min() < low < 0 < high < tail.max(), (low, high, tail.min(), tail.max())
    assert int8_error(tail, low, high) < int8_error(tail, tail.min(), tail.max())
    uniform = rng.uniform(0, 6, 100_000)
    assert best_range(uniform) == pytest.approx((0.0, uniform.max()), abs=6 / 255)  # within one step


def test_the_converter_quantizes_each_pinned_tensor_at_its_chosen_range(monkeypatch):
    """The pins are the tensors' int8 ranges: each chosen range (here half of min..max, to tell it from calibration's
    own) is the converted tensor's scale, the ReLU6 output, the BatchNorm output no activation follows and the pool."""
    import tensorflow as tf

    from pipeline.export import ExportConfig
    from pipeline.remedy import float_edits
    from pipeline.quant.convert import Mode, convert, keras_function, make_converter

    model, images = _separable(6.0)
    chosen = {}

    def half(values):
        chosen[len(chosen)] = (min(0.0, float(values.min()) / 2), float(values.max()) / 2)
        return chosen[len(chosen) - 1]

    monkeypatch.setattr(float_edits, "best_range", half)
    edited = float_edits.apply(model, ("ranges",), images, per_tensor=False)
    pinned = [layer.name[: -len("_range")] for layer in edited.layers if layer.name.endswith("_range")]
    # Not dw (a BatchNorm follows) nor the dense layer (the output); the pool's name is Keras' own, numbered per session.
    assert pinned[:3] == ["stem", "dw_relu", "pw_bn"] and len(pinned) == 4
    assert pinned[3].startswith("global_average_pooling2d")
    concrete, trackable = keras_function(edited, 8)
    model_bytes = convert(make_converter(concrete, trackable, Mode.INT8, ExportConfig(mode=Mode.INT8), images.astype(np.uint8)))
    scales = [d["quantization"][0] for d in tf.lite.Interpreter(model_content=model_bytes).get_tensor_details()]
    for low, high in chosen.values():
        assert any(abs(s - (high - low) / 255) < 1e-6 * (high - low) for s in scales), ((low, high), scales)
