"""Quantization-aware fine-tuning of RUN's Keras model with tensorflow-model-optimization (tf-keras only).

    pipeline export runs/digits --int8 --qat-epochs 2

tfmot's default 8-bit scheme has no quantize config for three weightless layers the registry's models use: the
input's Rescaling (every model), EfficientNet's own Normalization, and Multiply (squeeze-excite gates, hard-swish).
They get `OutputQuantizeConfig` below (no weights, the output fake-quantized like any activation), so the
converted model still takes raw pixels with a (1.0, 0) uint8 input. Everything else, the
softmax included, uses tfmot's default 8-bit scheme. tfmot annotates layer by layer and refuses a Keras
application nested as one layer (MobileNetV2's base), so such a model is flattened into one graph first.

Two losses. `fine_tune` learns the labels, as training did. `distil` learns the float model's own answers: its
softened scores on the training images and seeded views of them (the remedy ladder's `distil` rungs), because the
parity gate measures agreement with the float model, and on a weak float model the labels pull the int8 model
away from it (it learns to be right where float is wrong, which the gate counts as parting). BatchNorm statistics
stay frozen there: they are the float model's, which the student is to reproduce.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tfmot 0.8.1 works with tf-keras, not Keras 3


import numpy as np
import tf_keras as keras

from pipeline.errors import PipelineError
from pipeline.rundir.run import Run

LEARNING_RATE = 1e-4  # fine-tuning a trained model: small steps so QAT adapts rather than retrains
# Distillation: a tenth of that, measured closer to float on the photo-crop MobileNetV2 (bench/results/remedy.md 11)
DISTIL_LEARNING_RATE = 1e-5
TEMPERATURE = 2.0  # distillation: the float scores softened, so the runner-up classes carry weight too
DISTIL_VIEWS = 4  # distillation: each training image and 3 seeded views of it (crops, flips, exposure)
# What distillation fits: "softened" (cross-entropy on the scores at TEMPERATURE) or "logits" (squared error of the
# log-scores, each image's mean removed: the pre-softmax logits up to a constant, the limit of a high temperature)
DISTIL_LOSS = "softened"


def _tfmot():
    try:
        import tensorflow_model_optimization as tfmot
    except ImportError as err:  # optional: only the QAT route needs it
        raise PipelineError("--qat-epochs needs tensorflow-model-optimization: pip install 'edgeflow[host]'") from err
    return tfmot


def _output_config_class():
    quant = _tfmot().quantization.keras

    class OutputQuantizeConfig(quant.QuantizeConfig):
        """A layer with no weights to quantize and no activation of its own: only its output is fake-quantized."""

        def get_weights_and_quantizers(self, layer):
            return []

        def get_activations_and_quantizers(self, layer):
            return []

        def set_quantize_weights(self, layer, quantize_weights):
            pass

        def set_quantize_activations(self, layer, quantize_activations):
            pass

        def get_output_quantizers(self, layer):
            return [quant.quantizers.MovingAverageQuantizer(num_bits=8, per_axis=False, symmetric=False, narrow_range=False)]

        def get_config(self):
            return {}

    return OutputQuantizeConfig


# The layers tfmot's default scheme refuses: each gets an output quantizer alone, the tensor the converter quantizes for it.
_OUTPUT_ONLY = (keras.layers.Rescaling, keras.layers.Normalization, keras.layers.Multiply)


def quantize_aware(model: "keras.Model") -> "keras.Model":
    """A quantization-aware copy of `model`, with its trained weights."""
    from pipeline.quant.flatten import flatten, is_nested

    quant = _tfmot().quantization.keras
    config_class = _output_config_class()
    if is_nested(model):
        model = flatten(model)

    def annotate(layer):
        if isinstance(layer, _OUTPUT_ONLY):
            return quant.quantize_annotate_layer(layer, config_class())
        return quant.quantize_annotate_layer(layer)

    annotated = keras.models.clone_model(model, clone_function=annotate)
    annotated.set_weights(model.get_weights())  # clone_model builds fresh weights; keep the trained ones
    with quant.quantize_scope({config_class.__name__: config_class}):
        try:
            return quant.quantize_apply(annotated)
        except (RuntimeError, ValueError) as err:
            raise PipelineError(f"quantization-aware training cannot wrap {model.name}: {err}") from err


def rebuilt(run: Run, weights) -> "keras.Model":
    """The quantization-aware copy of RUN's Keras model with `weights` (a fine-tuned one's `get_weights()`): the same
    model in another process, for a conversion there."""
    qat_model = quantize_aware(keras.models.load_model(str(run.artifact("keras_model")), compile=False))
    qat_model.set_weights(weights)
    return qat_model


def fine_tune(run: Run, epochs: int, seed: int = 0) -> "keras.Model":
    """Load RUN's Keras model, make it quantization-aware, and fine-tune it `epochs` epochs on the training split."""
    from pipeline.data import load_split

    batch = run.global_batch
    path = run.artifact("keras_model")
    model = keras.models.load_model(str(path), compile=False)
    qat_model = quantize_aware(model)
    images, labels = load_split(run, "train")
    keras.utils.set_random_seed(seed)
    # Default strategy: a few epochs on one machine; the run's distributed setup is not needed here.
    # A training step that makes variables is traced twice: so no metric (nothing reads one, and Keras makes it in
    # the first step) and the optimizer's slots made before the step.
    qat_model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), loss="sparse_categorical_crossentropy")
    qat_model.optimizer.build(qat_model.trainable_variables)
    qat_model.fit(images.astype(np.float32), labels, batch_size=batch, epochs=epochs, shuffle=True, verbose=0)
    return qat_model


def distil(run: Run, epochs: int, seed: int = 0, exclude=()) -> "keras.Model":
    """RUN's Keras model made quantization-aware and fine-tuned `epochs` epochs to reproduce the float model's
    softened scores (temperature `TEMPERATURE`) on the training split without `exclude` (the ladder's tuning
    split, which must stay unseen to judge the result) and seeded views of those images."""
    import tensorflow as tf

    from pipeline.data import load_split
    from pipeline.remedy.tuning_split import random_view

    teacher = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    student = quantize_aware(teacher)
    for layer in student.layers:  # BatchNorm in inference mode: the float model's statistics are the target
        inner = getattr(layer, "layer", layer)
        if isinstance(inner, keras.layers.BatchNormalization):
            inner.trainable = False
    images, _ = load_split(run, "train")
    if len(exclude):
        images = images[np.setdiff1d(np.arange(len(images)), np.asarray(exclude, np.int64))]
    rng = np.random.default_rng(seed)
    size = images.shape[1]
    views = [images] + [np.stack([random_view(image, size, rng)[0] for image in images]) for _ in range(DISTIL_VIEWS - 1)]
    inputs = np.concatenate(views).astype(np.float32)
    scores = teacher.predict(inputs, batch_size=64, verbose=0)
    if DISTIL_LOSS == "logits":
        targets, loss = _centred_logits(scores).numpy(), _logit_error
    else:
        targets, loss = tf.nn.softmax(np.log(np.maximum(scores, 1e-7)) / TEMPERATURE).numpy(), _softened_cross_entropy
    del teacher
    keras.utils.set_random_seed(seed)
    student.compile(optimizer=keras.optimizers.Adam(DISTIL_LEARNING_RATE), loss=loss)
    student.optimizer.build(student.trainable_variables)
    student.fit(inputs, targets, batch_size=run.global_batch, epochs=epochs, shuffle=True, verbose=0)
    return student


def _softened_cross_entropy(target, scores):
    """Cross-entropy of the student's scores softened like the target's, times T^2 (the gradient's usual scale)."""
    import tensorflow as tf

    log_soft = tf.nn.log_softmax(tf.math.log(tf.maximum(scores, 1e-7)) / TEMPERATURE)
    return -tf.reduce_sum(target * log_soft, axis=-1) * TEMPERATURE ** 2


def _centred_logits(scores):
    """Log-scores with each image's mean removed: the logits, whatever constant softmax dropped."""
    import tensorflow as tf

    log = tf.math.log(tf.maximum(tf.cast(scores, tf.float32), 1e-7))
    return log - tf.reduce_mean(log, axis=-1, keepdims=True)


def _logit_error(target, scores):
    """Squared error of the student's centred logits against the float model's (`target`, already centred)."""
    import tensorflow as tf

    return tf.reduce_mean(tf.square(_centred_logits(scores) - target), axis=-1)
