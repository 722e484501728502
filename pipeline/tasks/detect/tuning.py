"""The remedy ladder's view of a detection run (pipeline/remedy/ladder.py's TuningTask): the tuning split, and the
detection gate's scores on it.

    pipeline export runs/shapes --int8 --remedy

The tuning split is a seeded share of the training split's images, recorded by id, refused if any is a held-out
image (by the bytes training recorded), with their own boxes as the ground truth; for a run `pipeline import` made
with --val-data, the share of --val-data it set aside (pipeline/tasks/detect/data/heldout.py's recorded_tuning), images the
imported model never trained on. It is scored as `pipeline
parity` scores held-out images (pipeline/tasks/detect/parity.py and detect_scores.py, whose functions are used here): the float Keras
model post-processed as the op does is the reference, the candidate's every detection goes to COCOeval for
mAP@.5, and agreement counts the reference's detections scoring >= 0.4 that the candidate finds with IoU >= 0.5
and the same class.

Each image is scored alone, with no crops or flips. A classifier's views exist because on its own training
images int8 and float give the same one answer; a detector's answer is many boxes and scores, every one of which
int8 can move, so agreement counted over detections parts on training images too (bench/results/remedy.md,
detection section). A cropped view would also cut objects at its edge, and its boxes would have to be cut the
same way to keep COCOeval's ground truth true, for no new information: training already drew flips and crops of
these images every epoch.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from pipeline.errors import DataError

# Quantization-aware training wraps the classifier's Keras model and fits it with cross-entropy; a detector
# trains with its own train step (focal and box loss over anchor targets), which the QAT route does not run.
QAT_SKIPPED = "quantization-aware training fits with the classifier's loss; a detector's own train step is not wrapped"


def split(run, seed: int):
    """The tuning images an import set aside from --val-data (recorded by identity: images the model never trained
    on), else a seeded share of the training split's images (at least tuning_split.TUNING_MIN); each decoded by the
    run's pixel contract as parity decodes held-out images; refused if any of them is a held-out image."""
    from pipeline.tasks.detect.data.heldout import recorded_tuning
    from pipeline.remedy import tuning_split
    from pipeline.tasks.detect.export import training_examples

    examples = training_examples(run)
    set_aside = recorded_tuning(run)
    if set_aside:  # the calibration rungs calibrate on the whole training split, which holds none of them
        _check_not_heldout(run, set_aside)
        return tuning_split.TuningSplit(np.zeros(0, np.int64), [e.id for e in set_aside], _pixels(run, set_aside),
                                        set_aside, run.data.seed, len(examples), views=1, set_aside=True, from_val=True)
    n = tuning_split.tuning_count(len(examples))
    tuning_seed = seed + tuning_split.TUNING_SEED_OFFSET
    positions = np.sort(np.random.default_rng(tuning_seed).permutation(len(examples))[:n])
    chosen = [examples[p] for p in positions]
    _check_not_heldout(run, chosen)
    return tuning_split.TuningSplit(positions, [e.id for e in chosen], _pixels(run, chosen), chosen, tuning_seed,
                                    len(examples), views=1)


def _check_not_heldout(run, chosen) -> None:
    held = {digest for _, digest in ((run.data.identity or {}).get("heldout") or {}).get("examples") or ()}
    touching = [e.id for e in chosen if e.digest in held]
    if touching:  # the splits are disjoint by construction; checked, as it must hold
        raise DataError(f"tuning image {touching[0]} is also a held-out image; the held-out split must stay unseen by the remedy")


def _pixels(run, examples) -> np.ndarray:
    size = (run.image_size, run.image_size)
    return np.stack([run.contract.load_pixels(e.image, size, name=e.id) for e in examples])


def reference(run, tuning) -> list:
    """The float detector's detections on the tuning images, by parity's own reference (an imported run's model as
    given)."""
    from pipeline.tasks.detect.parity import float_reference

    return float_reference(run, list(tuning.images))


def candidate(model: bytes, tuning, contract) -> list:
    """The converted detector's detections on the same pixels, every one the op keeps."""
    from edge.answers.detect import Detector, output_indices
    from edge.answers.runner import Runner
    from pipeline.console import native_quiet
    from pipeline.tasks.detect.scores import detections

    with native_quiet():
        runner = Runner.with_contract(model, contract, edgetpu=False)
    return detections(Detector(runner, output_indices(runner.interpreter)), list(tuning.images), tuning.ids)


def scores(found: Sequence, reference_found: Sequence, tuning, classes: List[str]):
    """mAP@.5 and mAP@[.5:.95] by COCOeval against the tuning images' own boxes, agreement with the reference."""
    from pipeline.tasks.detect.evaluate import evaluate
    from pipeline.tasks.detect.scores import agreement, gate_scores

    coco = evaluate(tuning.truth, found, classes)
    matched, total = agreement(reference_found, found)
    return gate_scores({"map50": coco.map50, "map": coco.map, "agree": matched, "detections": total})


SPREAD_RESAMPLES = 100  # bootstrap draws: a standard deviation to about 7%, at 2 COCOevals a draw


def spread(found: Sequence, reference_found: Sequence, tuning, classes: List[str], metric: str) -> float:
    """How far the candidate's drop (pp of `metric`, map50 or map) measured on these images can be from its drop on
    many: the standard deviation over the images resampled with replacement, the same draw for both models."""
    from pipeline.tasks.detect.evaluate import evaluate

    rng = np.random.default_rng(0)
    n, drops = len(tuning.truth), []
    for _ in range(SPREAD_RESAMPLES):
        drawn = rng.integers(0, n, n)
        truth = [tuning.truth[i] for i in drawn]
        drops.append(100 * (getattr(evaluate(truth, [reference_found[i] for i in drawn], classes), metric)
                            - getattr(evaluate(truth, [found[i] for i in drawn], classes), metric)))
    return float(np.std(drops))


def task():
    from pipeline.remedy.ladder import QAT_RUNGS, TuningTask
    from pipeline.tasks.detect.scores import gate_limits, metrics

    return TuningTask(metrics(), split, reference, candidate, scores, gate_limits,
                      {name: QAT_SKIPPED for name in QAT_RUNGS}, spread=spread)
