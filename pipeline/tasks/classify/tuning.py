"""The remedy ladder's view of a classification run (pipeline/remedy/tuning_task.py's TuningTask): the tuning split
(pipeline/remedy/tuning_split.py: the images training set aside, or class-balanced training images with views), the
SavedModel's softmax scores as the reference, the int8 model's on the CPU as the candidate, top-1 and agreement by
the gate's classification metrics, and the clients' feeds of every view.

    pipeline export runs/photos --int8 --remedy
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from pipeline.remedy.tuning_split import ClientPictures, TuningSplit, tuning_split
from pipeline.remedy.tuning_task import TuningTask
from pipeline.tasks.classify import class_metrics
from pipeline.tasks.classify.scores import METRICS, gate_scores


def reference(run, tuning: TuningSplit) -> np.ndarray:
    """The SavedModel's scores for the tuning images, in batches (an imported model that fixes its batch is fed that)."""
    import tensorflow as tf

    from pipeline.importing.run_limits import float_batch
    from pipeline.quant.convert import load_saved_model

    images = tuning.images
    step = float_batch(run, None) or 64
    serve = load_saved_model(run.artifact("saved_model")).signatures["serving_default"]
    out = [next(iter(serve(tf.constant(images[i:i + step], tf.float32)).values())).numpy() for i in range(0, len(images), step)]
    return np.concatenate(out).astype(np.float32)


def candidate(model: bytes, tuning: TuningSplit, contract) -> np.ndarray:
    """The int8 model's scores for the tuning images, on the CPU."""
    from edge.answers.runner import Runner
    from pipeline.console import native_quiet

    with native_quiet():
        runner = Runner.with_contract(model, contract, edgetpu=False)
    return runner.score_all(tuning.images)


def client_pixels(model: bytes, tuning: TuningSplit, contract, names: Sequence[str]):
    """The pixels each named client hands the model for the views as pictures (the view's region of the original,
    which the client fits to the input its own way), or why it cannot feed this model."""
    from edge.answers.classify import input_details
    from edge.errors import InputError
    from edge.answers.runner import Runner
    from pipeline.console import native_quiet
    from pipeline.inference.client_scores import CLIENTS

    with native_quiet():
        details = input_details(Runner.with_contract(model, contract, edgetpu=False).interpreter)
    pixels, refused = {}, {}
    for name in names:
        try:
            pixels[name] = np.concatenate([CLIENTS[name].feed(p, details, contract) for p in ClientPictures(tuning)])
        except InputError as err:
            refused[name] = f"a tuning view: {err}"
    return pixels, refused


def scores(outputs: np.ndarray, reference_outputs: np.ndarray, tuning: TuningSplit, classes: Sequence[str]):
    """Top-1 accuracy, agreement with the reference and the per-class scores, as the gate's named scores."""
    labels = tuning.truth
    top1, ref_top1 = outputs.argmax(1), reference_outputs.argmax(1)
    entry = {"images": len(labels), "correct": int((top1 == labels).sum()), "agree": int((top1 == ref_top1).sum()),
             **class_metrics.compared(top1, ref_top1, labels, len(classes))}
    return gate_scores(entry)


CLASSIFICATION_TASK = TuningTask(METRICS, tuning_split, reference, candidate, scores, clients=client_pixels)
