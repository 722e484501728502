"""The remedy ladder: when the int8 model fails the parity gate, try repairs in order of cost and keep the first
whose int8 model passes, without ever lowering the predicted Edge TPU mapping.

    pipeline export runs/photos --int8 --remedy

The gate is applied to a TUNING split (pipeline/remedy/tuning_split.py): the images `pipeline train` set aside
before training (seeded, recorded by identity in the manifest; for an imported model, a share of its --val-data), or
for a run that set none aside, a seeded share of the training split with views; never the held-out images
`pipeline parity` reports on, so the parity gate stays an honest test. The remedies that calibrate again calibrate
on the rest of the training split, so calibration and tuning do not overlap. Each rung (pipeline/remedy/rungs/) is
a small function of the user's export config returning another (or Skip: it does not apply); the ladder converts it
with the export stage's own `convert`, predicts its Edge TPU mapping with the pre-flight, and scores it on the
tuning split with the task's metrics (the task's `TuningTask`, pipeline/remedy/tuning_task.py). The export as asked
is judged first (pipeline/remedy/judge.py), and the ladder starts only when it fails there. When nothing passes,
the outcome says why in numbers (pipeline/remedy/near_ties.py).

Memory: the export stage converts every rung in a child process (a fine-tuning rung fine-tunes in one and converts
in another; pipeline/children/child.py), so what a conversion leaves in TensorFlow does not stay in this process; only
the best attempt so far keeps its converter (one that makes the model again where it is called), the others keep
their bytes; the SavedModel is loaded here once, for the float reference (pipeline/quant/convert.py).

With `--clients`, the ladder also judges each named client's feed: every view becomes a picture (the view's region
of the original, at the original's resolution), each client fits it to the input its own way, and the candidate
fed those pixels is gated against the float model fed the same pixels, as the int8 model is on the contract's. That
is the part of a client's loss a remedy can repair: what a client's resize costs the float model too (parity's
client rows hold it) is the training's to fix (`train --client-fits`), and a gate on it would fail every rung alike.
The clients' pixels are computed once, from the export as asked (every rung keeps its input, Coral's convention).
"""
from __future__ import annotations

import dataclasses
import gc
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from pipeline import gate
from pipeline.errors import PipelineError
from pipeline.inference.client_scores import gate_name
from pipeline.remedy.judge import split_notes, spread_note, tuning_failures
from pipeline.remedy.near_ties import near_ties
from pipeline.remedy.outcome import Attempt, Outcome
from pipeline.remedy.rungs import Rung, Skip, bias, calibration, equalize, fine_tuning, per_channel, ranges
from pipeline.remedy.table import row, skip_row, table  # table: the export prints an outcome's whole climb with it
from pipeline.remedy.tuning_task import TuningTask

# In order of cost (measured on the photo-folder MobileNetV2 in bench/results/remedy.md): one conversion; one
# conversion and a float pass; per-channel costs a conversion too but overrides what the user asked, so it comes
# after the rungs that keep per-tensor weights; QAT costs about 20 conversions. The range rung costs what bias
# does but repaired nothing measured (section 11 there), so it comes after bias; distillation before label QAT,
# because it parts from float less (section 11, tests/pipeline/remedy/test_ladder.py).
LADDER: Sequence[Rung] = (calibration.RUNG, equalize.RUNG, bias.RUNG, ranges.RUNG, per_channel.RUNG, *fine_tuning.RUNGS)
QAT_RUNGS = tuple(rung.name for rung in fine_tuning.RUNGS)  # the rungs that fine-tune (a task may not apply them)


def _changes_keras_model(config) -> bool:
    """Whether the rung's export changes the run's Keras model (QAT, a float edit), which only a trained run has."""
    return bool(getattr(config, "qat_epochs", 0) or getattr(config, "float_edits", ()))


def _no_keras_model(run, rung: str) -> str:
    from pipeline.importing.run_limits import keras_model_missing

    return keras_model_missing(run, f"the {rung} rung")


def repair(config, run, convert: Callable, limits: gate.GateLimits = gate.GATE, *, task: TuningTask,
           ladder: Optional[Sequence[Rung]] = None, layer_errors: Optional[Callable] = None, say: Callable = lambda line: None) -> Outcome:
    """The export as asked, then each rung until one passes the gate on the tuning split with its Edge TPU mapping
    kept. `convert(config, run)` is the export stage's (a task's own: anything with `.bytes` and `.contract`);
    `layer_errors(model)` names the layers that motivated it. Each client in `config.clients` (where the task can
    feed them) is judged too: the candidate fed the views as that client feeds them, against float fed the same.
    `task` is the run's task's view of the split (`Task.tuning`)."""
    limits = task.limits(limits).validate(task.metrics)
    clients, clients_note = tuple(config.clients), None
    if clients and task.clients is None:
        clients_note = f"clients {', '.join(clients)} are gated in parity only: this task's tuning split has no client feeds"
        say(clients_note)
        clients = ()
    tuning = task.split(run, config.seed)
    notes: List[str] = split_notes(run, tuning, limits)
    for note in notes:
        say(note)
    reference = task.reference(run, tuning)
    reference_scores = task.scores(reference, reference, tuning, run.labels)
    client_pixels: Optional[Dict[str, np.ndarray]] = None  # from the export as asked, with the float model's answers
    client_references: Dict[str, Tuple[np.ndarray, Dict[str, gate.Score]]] = {}
    refused: Dict[str, str] = {}
    attempts: List[Attempt] = []
    skipped: List[Tuple[str, str]] = []
    baseline_ops: Optional[int] = None
    motivation = None
    answers: Dict[str, object] = {}  # the best attempt's outputs on the tuning split (and the last one's)
    best: Optional[int] = None  # the attempt that would be chosen if nothing passes
    for rung in (Rung("none", "the export as asked", lambda c, t: c), *(LADDER if ladder is None else ladder)):
        candidate_config: Union[Skip, object] = (Skip(task.not_applicable[rung.name]) if rung.name in task.not_applicable
                                                 else rung.config(config, tuning))
        if not isinstance(candidate_config, Skip) and _changes_keras_model(candidate_config) and not run.has("keras_model"):
            candidate_config = Skip(_no_keras_model(run, rung.name))  # an imported run: pipeline/importing/run_limits.py
        if isinstance(candidate_config, Skip):
            skipped.append((rung.name, candidate_config.why))
            say(skip_row(rung.name, candidate_config.why))
            continue
        start = time.monotonic()
        try:
            model = convert(dataclasses.replace(candidate_config, remedy=rung.name if rung.name != "none" else None), run)
        except (PipelineError, ValueError, RuntimeError) as err:
            if rung.name == "none":
                raise  # the export as asked fails as it does without --remedy
            attempts.append(Attempt(rung.name, rung.what, None, {}, [], 0, 0, False, time.monotonic() - start,
                                    str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__))
            say(row(attempts[-1], limits.metric))
            continue
        ops_on, total = _mapping(model.bytes)
        if baseline_ops is None:
            baseline_ops = ops_on
        outputs = task.candidate(model.bytes, tuning, model.contract)
        answers[rung.name] = outputs
        scores = task.scores(outputs, reference, tuning, run.labels)
        if clients and client_pixels is None:
            client_pixels, refused = task.clients(model.bytes, tuning, model.contract, clients)
            for name, pixels in client_pixels.items():
                float_outputs = task.reference(run, tuning._replace(images=pixels))
                client_references[name] = (float_outputs, task.scores(float_outputs, float_outputs, tuning, run.labels))
        client_scores = {}
        for name, pixels in (client_pixels or {}).items():
            as_fed = tuning._replace(images=pixels)
            client_scores[name] = task.scores(task.candidate(model.bytes, as_fed, model.contract), client_references[name][0],
                                              as_fed, run.labels)
        failures = tuning_failures(scores, reference_scores, limits, task.metrics,
                                   {name: (s, client_references[name][1]) for name, s in client_scores.items()})
        failures += [f"{gate_name(name)}: cannot feed the model: {why}" for name, why in refused.items()]
        attempt = Attempt(rung.name, rung.what, model, scores, failures, ops_on, total, ops_on < baseline_ops,
                          time.monotonic() - start, clients=client_scores)
        attempts.append(attempt)
        say(row(attempt, limits.metric))
        if rung.name == "none" and tuning.set_aside and task.spread is not None:
            deviation = task.spread(outputs, reference, tuning, run.labels, limits.metric)
            if deviation > limits.max_drop / 2:  # a loss at the limit is then within two deviations of none
                notes.append(spread_note(len(tuning.images), deviation, limits))
                say(notes[-1])
        if attempt.passed:
            break
        if rung.name == "none" and layer_errors is not None:
            motivation = layer_errors(model)
        # Only the best attempt so far can still be chosen: the others keep their bytes, not the converter (and the
        # SavedModel or QAT Keras model it holds) nor the calibration images, so rungs do not pile up in memory.
        if best is None or attempt.rank(limits.metric) > attempts[best].rank(limits.metric):
            best, dropped = len(attempts) - 1, best
        else:
            dropped = len(attempts) - 1
        if dropped is not None:
            attempts[dropped] = attempts[dropped].dropped()
            answers.pop(attempts[dropped].remedy, None)
        model = attempt = outputs = None
        gc.collect()  # TensorFlow's objects form cycles: free the dropped models now, before the next rung
    chosen = next((a for a in attempts if a.passed), None) or max(attempts, key=lambda a: a.rank(limits.metric))
    ties = None
    if not chosen.passed and isinstance(reference, np.ndarray) and isinstance(answers.get(chosen.remedy), np.ndarray):
        ties = near_ties(reference, answers[chosen.remedy])
    return Outcome(chosen, attempts, tuning, motivation, limits, task.metrics, tuple(skipped), reference_scores, clients,
                   clients_note, {name: scores for name, (_, scores) in client_references.items()}, ties, tuple(notes))


def _mapping(model: bytes):
    from pipeline.edgetpu import preflight

    prediction = preflight.analyze(model)
    on = 0 if prediction.fatal else prediction.ops_on_edgetpu
    return on, len(prediction.rows)
