"""The remedy ladder: when the int8 model fails the parity gate, try repairs in order of cost and keep the first
whose int8 model passes, without ever lowering the predicted Edge TPU mapping.

    pipeline export runs/photos --int8 --remedy

The gate is applied to a TUNING split (pipeline/remedy/tuning_split.py): the images `pipeline train` set aside
before training (seeded, recorded by identity in the manifest; for an imported model, a share of its --val-data), or
for a run that set none aside, a seeded share of the training split with views; never the held-out images `pipeline parity` reports on, so the parity gate stays an
honest test. The remedies that calibrate again calibrate on the rest of
the training split, so calibration and tuning do not overlap. Each rung is a small function of the user's export
config returning another (or None: it does not apply); the ladder converts it with the export stage's own
`convert`, predicts its Edge TPU mapping with the pre-flight, and scores it on the tuning split with the task's
metrics. The rungs: a larger calibration set; cross-layer equalization and bias correction, weight edits on a
copy of the float model (pipeline/remedy/float_edits.py); activation ranges chosen to minimise int8 error, pinned
on such a copy; per-channel weights; a few epochs of QAT that learns the float model's own scores (distillation:
the gate measures agreement with float), then a few that learn the labels (pipeline/quant/qat.py).

When nothing passes (classification), the outcome says why in numbers: how many tuning answers are near ties of
the float model, which an int8 model as noisy as the best attempt flips about half of (`near_ties`), and that
a float model that decides more clearly (more training images; more epochs only while held-out accuracy rises) is
the repair. A set-aside split
too small to tell the limit from twice as many disagreements (`weak_judge`: 10% of 240 photos is 24 images) is said
to be a weak judge, in the table and the manifest; the held-out gate (`pipeline parity`) stays the judge then.

Memory: the export stage converts every rung in a child process (a fine-tuning rung fine-tunes in one and converts
in another; pipeline/children/child.py), so what a conversion leaves in TensorFlow does not stay in this process; only
the best attempt so far keeps its converter (one that makes the model again where it is called), the others keep
their bytes; the SavedModel is loaded here once, for the float reference (pipeline/quant/convert.py).

The tuning split is harder than the held-out images (its views are new crops of training photos, and int8
parts from float on 2-3% of them where it parts on 0.6-3% of held-out images), so its agreement is judged like
with like: an attempt fails on agreement only when its disagreements are more than a model exactly at the limit
would show by chance (one-sided binomial test, `SIGNIFICANCE`). The export as asked is judged so first, and the
ladder starts only when it fails there. The top-1 drop is judged as the gate judges it.

With `--clients`, the ladder also judges each named client's feed: every view becomes a picture (the view's region
of the original, at the original's resolution), each client fits it to the input its own way, and the candidate
fed those pixels is gated against the float model fed the same pixels, as the int8 model is on the contract's. That
is the part of a client's loss a remedy can repair: what a client's resize costs the float model too (parity's
client rows hold it) is the training's to fix (`train --client-fits`), and a gate on it would fail every rung alike.
The clients' pixels are computed once, from the export as asked (every rung keeps its input, Coral's convention).

The task is a `TuningTask`: it draws the tuning split, scores the reference and a candidate on it, turns them into
the gate's named scores (pipeline/gate.py), reads the user's limits as its own gate does, and names the rungs that
do not apply to it and why. Classification's is `CLASSIFICATION_TASK`; each task module hands its own to the
export stage (`Task.tuning`), so the ladder and the rungs are one for every task.
"""
from __future__ import annotations

import dataclasses
import gc
import math
import time
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from pipeline import gate
from pipeline.errors import PipelineError
from pipeline.inference.client_scores import gate_name
from pipeline.remedy.tuning_split import ClientPictures, TuningSplit, drawn_note, tuning_split

SIGNIFICANCE = 0.05  # an agreement under the limit fails only when a model at the limit shows it this rarely
QAT_EPOCHS = (2, 5)  # a few epochs: the ladder's most expensive rungs
DISTIL_EPOCHS = (2,)  # distillation's epochs: each is DISTIL_VIEWS (pipeline/quant/qat.py) passes over the images
QAT_RUNGS = (*(f"distil-{n}" for n in DISTIL_EPOCHS), *(f"qat-{n}" for n in QAT_EPOCHS))  # the rungs that fine-tune


# --- the task: how a model is scored on the tuning split ---------------------------------------------------------


class TuningTask(NamedTuple):
    metrics: Mapping[str, gate.Metric]  # the gate's named metrics for this task
    split: Callable  # (run, seed) -> TuningSplit
    reference: Callable  # (run, TuningSplit) -> the reference model's outputs
    candidate: Callable  # (model bytes, TuningSplit, PixelContract) -> the candidate's outputs
    scores: Callable  # (outputs, reference outputs, TuningSplit, class names) -> {metric key: gate.Score}
    limits: Callable = lambda limits: limits  # the user's GateLimits as this task's parity gate applies them
    not_applicable: Mapping[str, str] = {}  # rung name -> why it does not apply to this task (recorded as skipped)
    # (model bytes, TuningSplit, PixelContract, client names) -> ({client: uint8 pixels [n,S,S,3]}, {client: why not}):
    # what each client hands a model whose input takes the camera bytes as they are; None: not judged on the split
    clients: Optional[Callable] = None
    # (outputs, reference outputs, TuningSplit, class names, gate metric) -> the standard deviation (pp) of the drop
    # over the tuning images resampled: how well a set-aside split of these few images can judge --max-drop
    spread: Optional[Callable] = None


def _savedmodel_outputs(run, tuning: TuningSplit) -> np.ndarray:
    import tensorflow as tf

    from pipeline.importing.run_limits import float_batch
    from pipeline.quant.convert import load_saved_model

    images = tuning.images
    step = float_batch(run, None) or 64  # an imported model that fixes its batch is fed that
    serve = load_saved_model(run.artifact("saved_model")).signatures["serving_default"]
    out = [next(iter(serve(tf.constant(images[i:i + step], tf.float32)).values())).numpy() for i in range(0, len(images), step)]
    return np.concatenate(out).astype(np.float32)


def _tflite_outputs(model: bytes, tuning: TuningSplit, contract) -> np.ndarray:
    from edge.answers.runner import Runner
    from pipeline.console import native_quiet

    with native_quiet():
        runner = Runner.with_contract(model, contract, edgetpu=False)
    return runner.score_all(tuning.images)


def _client_pixels(model: bytes, tuning: TuningSplit, contract, names: Sequence[str]):
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


def _classification_scores(outputs: np.ndarray, reference: np.ndarray, tuning: TuningSplit, classes: Sequence[str]):
    from pipeline.tasks.classify import class_metrics

    labels = tuning.truth
    top1, ref_top1 = outputs.argmax(1), reference.argmax(1)
    entry = {"images": len(labels), "correct": int((top1 == labels).sum()), "agree": int((top1 == ref_top1).sum()),
             **class_metrics.compared(top1, ref_top1, labels, len(classes))}
    return gate.classification_scores(entry)


CLASSIFICATION_TASK = TuningTask(gate.CLASSIFICATION, tuning_split, _savedmodel_outputs, _tflite_outputs, _classification_scores,
                                 clients=_client_pixels)


# --- the rungs --------------------------------------------------------------------------------------------------


class Rung(NamedTuple):
    name: str
    what: str  # one line for the table and the report
    config: Callable  # (the user's config, tuning split) -> an export config, or Skip: it does not apply


class Skip(NamedTuple):
    """A rung that does not apply to this export, and why (one line for the table and the manifest)."""

    why: str


def _calibrate_on_rest(config, tuning: TuningSplit):
    """Every training image outside the tuning split, drawn with another seed: a larger (when fewer were asked)
    and differently drawn calibration set."""
    rest = tuning.train_count - len(tuning.positions)
    return dataclasses.replace(config, calibration_samples=max(rest, config.calibration_samples or 0),
                               calibration_exclude=tuple(int(p) for p in tuning.positions), seed=config.seed + 1,
                               calibration_data=None)


def _calibration(config, tuning: TuningSplit):
    from pipeline.quant.calibration import DEFAULT_CALIBRATION_SAMPLES

    asked = config.calibration_samples or DEFAULT_CALIBRATION_SAMPLES
    if config.calibration_data is None and not len(tuning.positions) and asked >= tuning.train_count and not config.clients:
        # Drawn with another seed from the same images, the calibration set would be the same set.
        return Skip(f"the export as asked already calibrates on all {tuning.train_count} training images")
    # The judged clients' feeds of the same images join them: an unsmoothed resize can hand the model pixels the
    # contract's never reach, past ranges set on the contract's alone (tests/commands/test_advice_remedy.py).
    return dataclasses.replace(_calibrate_on_rest(config, tuning), calibration_clients=tuple(config.clients))


def _per_channel(config, tuning: TuningSplit):
    if not config.per_tensor:
        return Skip("the weights are already per channel")
    return dataclasses.replace(_calibrate_on_rest(config, tuning), per_tensor=False, seed=config.seed)


# The float edits take their statistics (ReLU6 peaks, mean inputs) from the calibration images, so they build on
# the calibration rung: 8 images under-estimate the peaks, and equalization then moves ReLU6's cap on new images.
def _equalize(config, tuning: TuningSplit):
    if not config.per_tensor:
        return Skip("per-channel weights already give each depthwise channel its own scale")
    return dataclasses.replace(_calibrate_on_rest(config, tuning), float_edits=("equalize",))


def _bias(config, tuning: TuningSplit):
    return dataclasses.replace(_calibrate_on_rest(config, tuning), float_edits=("bias",))


def _ranges(config, tuning: TuningSplit):
    return dataclasses.replace(_calibrate_on_rest(config, tuning), float_edits=("ranges",))


def _qat(epochs: int, distil: bool = False):
    def rung(config, tuning: TuningSplit):
        if config.qat_epochs >= epochs and not distil:
            return Skip(f"the export as asked already fine-tunes {config.qat_epochs} epochs")
        # The tuning split stays out of distillation's images and calibration both: the ladder judges on it.
        return dataclasses.replace(config, qat_epochs=epochs, qat_distil=distil, per_tensor=False, calibration_data=None,
                                   calibration_exclude=tuple(int(p) for p in tuning.positions))
    return rung


# In order of cost (measured on the photo-folder MobileNetV2 in bench/results/remedy.md): one conversion; one
# conversion and a float pass; per-channel costs a conversion too but overrides what the user asked, so it comes
# after the rungs that keep per-tensor weights; QAT costs about 20 conversions. The range rung costs what bias
# does but repaired nothing measured (section 11 there), so it comes after bias; distillation before label QAT,
# because it parts from float less (section 11, tests/pipeline/remedy/test_ladder.py).
LADDER: Sequence[Rung] = (
    Rung("calibration", "calibrate on every training image outside the tuning split, drawn with another seed (and on each "
         "judged client's feed of them)", _calibration),
    Rung("equalize", "cross-layer equalization of depthwise-separable pairs (per-tensor weights)", _equalize),
    Rung("bias", "bias correction of conv/dense layers for their weights' expected rounding shift", _bias),
    Rung("ranges", "activation ranges that minimise int8 error on the calibration rung's images (percentile ends), pinned", _ranges),
    Rung("per-channel", "one scale per output channel of each weight tensor, where per tensor was asked", _per_channel),
    *(Rung(f"distil-{n}", f"{n} epochs of quantization-aware fine-tuning on the float model's own scores (per channel)",
           _qat(n, distil=True)) for n in DISTIL_EPOCHS),
    *(Rung(f"qat-{n}", f"{n} epochs of quantization-aware fine-tuning (per channel)", _qat(n)) for n in QAT_EPOCHS),
)


def _changes_keras_model(config) -> bool:
    """Whether the rung's export changes the run's Keras model (QAT, a float edit), which only a trained run has."""
    return bool(getattr(config, "qat_epochs", 0) or getattr(config, "float_edits", ()))


def _no_keras_model(run, rung: str) -> str:
    from pipeline.importing.run_limits import keras_model_missing

    return keras_model_missing(run, f"the {rung} rung")


# --- the ladder ---------------------------------------------------------------------------------------------------


class Attempt(NamedTuple):
    remedy: str  # "none" for the export as asked
    what: str
    model: object  # the export stage's Converted
    scores: Dict[str, gate.Score]  # on the tuning split
    failures: List[str]  # the gate's failed limits on the tuning split
    ops_on_edgetpu: int
    total_ops: int
    mapping_lowered: bool  # fewer ops predicted on the Edge TPU than the export as asked
    seconds: float
    error: Optional[str] = None  # the rung could not make a model (e.g. QAT cannot wrap a nested base model)
    clients: Mapping[str, Dict[str, gate.Score]] = {}  # the gated clients' scores on the tuning split, by client

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures and not self.mapping_lowered

    def rank(self, metric: str):
        """Larger is better: a model at all, a kept mapping, fewer failed limits, more agreement, a higher gate metric."""
        if self.error is not None:
            return (False, False, 0, 0, 0)
        return (True, not self.mapping_lowered, -len(self.failures), self.scores[gate.AGREEMENT].exact, self.scores[metric].exact)

    def record(self, metric: str, config=None) -> Dict[str, object]:
        return {"remedy": self.remedy, "what": self.what,
                "tuning": {key: score.shown for key, score in self.scores.items()},
                "gate_metric": metric, "passed": self.passed, "failures": list(self.failures),
                "edgetpu": {"ops_on_edgetpu": self.ops_on_edgetpu, "total_ops": self.total_ops,
                            "lowered": self.mapping_lowered},
                "size_bytes": len(self.model.bytes) if self.model else None, "seconds": round(self.seconds, 2),
                "error": self.error,
                "clients": {name: {key: score.shown for key, score in scores.items()} for name, scores in self.clients.items()}}


class Outcome(NamedTuple):
    chosen: Attempt  # the first that passed, or the best of them when none did
    attempts: List[Attempt]
    tuning: TuningSplit
    motivation: Optional[List[Dict[str, object]]]  # the worst layers of the export as asked, when it failed
    limits: gate.GateLimits  # as the task's gate applies them
    metrics: Mapping[str, gate.Metric] = gate.CLASSIFICATION  # the task's, for the table's column names
    skipped: Tuple[Tuple[str, str], ...] = ()  # (rung, why) for the rungs reached that do not apply
    reference: Optional[Dict[str, gate.Score]] = None  # the float reference's own scores on the tuning split
    clients: Tuple[str, ...] = ()  # the clients gated like the int8 model on the tuning split
    clients_note: Optional[str] = None  # why clients asked for were not judged (a task without client feeds)
    client_references: Mapping[str, Dict[str, gate.Score]] = {}  # the float model's scores as each client feeds the views
    ties: Optional[Dict[str, object]] = None  # when nothing passed (classification): the float model's near ties, `near_ties`
    notes: Tuple[str, ...] = ()  # what the user should know of the tuning split (drawn from training; a weak judge)

    @property
    def passed(self) -> bool:
        return self.chosen.passed

    def failures(self) -> List[str]:
        """The gate's message when nothing passed: the chosen (best) attempt's failures, on the tuning split."""
        if self.passed:
            return []
        lines = self.chosen.failures or ["every remedy that passed the gate lowered the predicted Edge TPU mapping"]
        # The near ties are the int8 model's on the contract: they say nothing of a client that alone failed.
        own = any(line.startswith("int8_cpu: ") for line in self.chosen.failures)
        why = [ties_line(self.ties, self.limits.min_agreement)] if self.ties and own else []
        return [f"on the tuning split, no remedy passed ({', '.join(a.remedy for a in self.attempts)}); "
                f"kept the best, {self.chosen.remedy}: " + "; ".join(lines), *why]

    def record(self) -> Dict[str, object]:
        """The manifest's `remedy` fact."""
        metric = self.limits.metric
        return {"passed": self.passed, "chosen": self.chosen.remedy, "tuning_split": self.tuning.record(),
                "limits": {"max_drop_pp": self.limits.max_drop, "min_agreement": self.limits.min_agreement, "metric": metric},
                "reference": {key: score.shown for key, score in (self.reference or {}).items()},
                "motivation": self.motivation, "attempts": [a.record(metric) for a in self.attempts],
                "skipped": [{"remedy": name, "why": why} for name, why in self.skipped], "failures": self.failures(),
                "clients": list(self.clients), "clients_note": self.clients_note, "near_ties": self.ties,
                "notes": list(self.notes),
                "client_references": {name: {key: score.shown for key, score in scores.items()}
                                      for name, scores in self.client_references.items()}}


def repair(config, run, convert: Callable, limits: gate.GateLimits = gate.GATE, task: TuningTask = CLASSIFICATION_TASK,
           ladder: Optional[Sequence[Rung]] = None, layer_errors: Optional[Callable] = None, say: Callable = lambda line: None) -> Outcome:
    """The export as asked, then each rung until one passes the gate on the tuning split with its Edge TPU mapping
    kept. `convert(config, run)` is the export stage's (a task's own: anything with `.bytes` and `.contract`);
    `layer_errors(model)` names the layers that motivated it. Each client in `config.clients` (where the task can
    feed them) is judged too: the candidate fed the views as that client feeds them, against float fed the same."""
    limits = task.limits(limits).validate(task.metrics)
    clients, clients_note = tuple(config.clients), None
    if clients and task.clients is None:
        clients_note = f"clients {', '.join(clients)} are gated in parity only: this task's tuning split has no client feeds"
        say(clients_note)
        clients = ()
    tuning = task.split(run, config.seed)
    notes: List[str] = []
    if not tuning.set_aside and (tuning.views > 1 or run.origin):  # an imported model may have fit any --data image
        notes.append(f"note: {drawn_note(run)}")
    elif tuning.set_aside and weak_judge(len(tuning.images), limits.min_agreement) > WEAK_JUDGE:
        notes.append(weak_note(len(tuning.images), limits.min_agreement))
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
            attempts[dropped] = _dropped(attempts[dropped])
            answers.pop(attempts[dropped].remedy, None)
        model = attempt = outputs = None
        gc.collect()  # TensorFlow's objects form cycles: free the dropped models now, before the next rung
    chosen = next((a for a in attempts if a.passed), None) or max(attempts, key=lambda a: a.rank(limits.metric))
    ties = None
    if not chosen.passed and isinstance(reference, np.ndarray) and isinstance(answers.get(chosen.remedy), np.ndarray):
        ties = near_ties(reference, answers[chosen.remedy])
    return Outcome(chosen, attempts, tuning, motivation, limits, task.metrics, tuple(skipped), reference_scores, clients,
                   clients_note, {name: scores for name, (_, scores) in client_references.items()}, ties, tuple(notes))


WEAK_JUDGE = 0.2  # a split that passes a model parting twice as often as the limit allows this often is a weak judge


def weak_judge(n: int, min_agreement: float) -> float:
    """How often a model that parts from float twice as often as `min_agreement` allows passes a tuning split of n
    scored images (agreement under the limit fails only beyond chance, `tuning_failures`)."""
    rate = 1.0 - min_agreement
    if n <= 0 or rate <= 0:
        return 1.0 if n <= 0 else 0.0
    passing = 0  # the most disagreements that still pass
    while passing < n and chance_of_at_least(passing + 1, n, rate) >= SIGNIFICANCE:
        passing += 1
    return 1.0 - chance_of_at_least(passing + 1, n, min(1.0, 2 * rate))


def weak_note(n: int, min_agreement: float) -> str:
    return (f"note: the tuning split holds {n} images: a model that parts from float twice as often as --min-agreement "
            f"{min_agreement:g} allows passes it {weak_judge(n, min_agreement):.0%} of the time, so a pass on it says "
            "little; `pipeline parity` (held-out) is the gate (more data, or a larger tuning_fraction when training, "
            "makes the split a judge)")


def spread_note(n: int, deviation: float, limits: gate.GateLimits) -> str:
    return (f"note: on these {n} tuning images the export's {limits.metric} drop varies by {deviation:.2f} pp (standard "
            f"deviation over the images resampled) against --max-drop {limits.max_drop:g} pp: the split cannot tell a "
            "loss at the limit from none, so a pass says little; `pipeline parity` (held-out) is the gate (more "
            "--val-data, or a larger --tuning-fraction, makes it a judge)")


class Dropped(NamedTuple):
    """What an attempt that can no longer be chosen keeps of its model: its bytes (the record's size) and facts."""

    bytes: bytes
    facts: Mapping[str, object]


def _dropped(attempt: Attempt) -> Attempt:
    model = attempt.model
    return attempt if model is None else attempt._replace(model=Dropped(model.bytes, getattr(model, "facts", {})))


# --- why nothing passed: the float model's near ties --------------------------------------------------------------

NOISE_QUANTILE = 0.95  # the margin shift int8 makes on this share of images: its noise level


def near_ties(reference: np.ndarray, outputs: np.ndarray) -> Dict[str, object]:
    """How many answers are near ties of the float model, and what that costs any int8 model as noisy as this one.

    For each image, the float model's margin (top-1 score minus its runner-up's) and how much the int8 model
    moves it (the change of the same two classes' difference). The noise is the size of shift int8 stays under on
    95% of the images; a near tie is an answer whose margin is under it: for an int8 model that noisy it is a coin
    flip, so such a model is expected to part from float on about half of them, whatever its rung. (The shift
    grows where float hesitates, so drawing shifts at random over all images would predict far fewer flips:
    on the photo-crop MobileNetV2 of bench/results/remedy.md that predicted 0.992 where 0.9625 was measured;
    half the near ties predicted 0.9625.)"""
    order = np.argsort(-reference, axis=1)
    rows = np.arange(len(reference))
    top, second = order[:, 0], order[:, 1]
    margin = reference[rows, top] - reference[rows, second]
    shift = (outputs[rows, top] - outputs[rows, second]) - margin
    noise = float(np.quantile(np.abs(shift), NOISE_QUANTILE))
    ties = int((margin < noise).sum())
    return {"images": int(len(margin)), "noise": round(noise, 4), "near_ties": ties,
            "expected_agreement": round(1.0 - 0.5 * ties / max(1, len(margin)), 4),
            "median_margin": round(float(np.median(margin)), 4)}


def ties_line(ties: Dict[str, object], min_agreement: float) -> str:
    """The near ties in one line for the export's message, with what the user can do."""
    share = ties["near_ties"] / max(1, ties["images"])
    return (f"why: {ties['near_ties']} of {ties['images']} tuning answers ({share:.1%}) are near ties of the float model "
            f"(its top-2 margin under {ties['noise']:g}, the margin shift int8 makes on {NOISE_QUANTILE:.0%} of images; "
            f"median margin {ties['median_margin']:g}); an int8 model that noisy flips about half of them, so it is "
            f"expected to agree on about {ties['expected_agreement']:.1%} (limit {min_agreement:.0%}) whatever the rung. "
            "A float model that decides more clearly leaves fewer: train on more images (or longer, while held-out "
            "accuracy still rises), then export again")


def tuning_failures(scores: Dict[str, gate.Score], reference: Dict[str, gate.Score], limits: gate.GateLimits,
                    metrics: Mapping[str, gate.Metric],
                    clients: Mapping[str, Tuple[Dict[str, gate.Score], Dict[str, gate.Score]]] = {}) -> List[str]:
    """The gate's failures on the tuning split, for the int8 model against `reference` and for each gated client
    (name -> its scores, and the float model's fed the same way), but agreement under the limit only when it is so
    beyond chance."""
    judged = [("int8_cpu", scores, reference), *((gate_name(name), mine, theirs) for name, (mine, theirs) in clients.items())]
    limits_drop_only = limits._replace(min_agreement=0.0)
    failures: List[str] = []
    for name, mine, theirs in judged:
        failures += gate.check({gate.REFERENCE: theirs, name: mine}, limits_drop_only, metrics, gated=(name,))
        agreement = mine[gate.AGREEMENT]
        if agreement.exact < limits.min_agreement and agreement.total:
            off, n = agreement.total - agreement.count, agreement.total
            p = chance_of_at_least(off, n, 1.0 - limits.min_agreement)
            if p < SIGNIFICANCE:
                failures.append(f"{name}: {gate.AGREEMENT} {agreement.describe()} is under --min-agreement "
                                f"{limits.min_agreement:g} beyond chance (p={p:.3g} for a model at the limit)")
    return failures


def chance_of_at_least(k: int, n: int, rate: float) -> float:
    """P(X >= k) for X ~ Binomial(n, rate): how often a model that parts from float at `rate` parts k or more times."""
    if k <= 0:
        return 1.0
    if rate <= 0.0:
        return 0.0
    if rate >= 1.0:
        return 1.0
    log_rate, log_rest = math.log(rate), math.log1p(-rate)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_rate + (n - i) * log_rest
             for i in range(k, n + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def _mapping(model: bytes):
    from pipeline.edgetpu import preflight

    prediction = preflight.analyze(model)
    on = 0 if prediction.fatal else prediction.ops_on_edgetpu
    return on, len(prediction.rows)


def header(metric: gate.Metric) -> str:
    return (f"{'remedy':<12} {'tuning ' + metric.short:>14} {'agreement':>9} {'gate':>6} {'edge tpu':>9} {'bytes':>9} "
            f"{'seconds':>8}")


def row(attempt: Attempt, metric: str) -> str:
    if attempt.error is not None:
        return f"{attempt.remedy:<12} could not make a model ({attempt.seconds:.1f} s): {attempt.error}"
    s = attempt.scores
    gate_text = "pass" if attempt.passed else ("lower" if attempt.mapping_lowered else "fail")
    clients = "".join(f"  {name} {scores[metric].shown:.4f}" for name, scores in attempt.clients.items())
    return (f"{attempt.remedy:<12} {s[metric].shown:>14.4f} {s[gate.AGREEMENT].shown:>9.4f} {gate_text:>6} "
            f"{attempt.ops_on_edgetpu:>4}/{attempt.total_ops:<4} {len(attempt.model.bytes):>9,} {attempt.seconds:>8.1f}"
            + clients)


def skip_row(name: str, why: str) -> str:
    return f"{name:<12} skipped: {why}"


def table(outcome: Outcome) -> str:
    tuning = outcome.tuning
    metric = outcome.metrics[outcome.limits.metric]
    judged = (f"; as {', '.join(outcome.clients)} feed{'s' if len(outcome.clients) == 1 else ''} them, int8 is gated "
              "against float fed the same") if outcome.clients else ""
    lines = [f"remedy ladder on a tuning split of {tuning.describe()}{judged}:",
             header(metric), *(row(a, outcome.limits.metric) for a in outcome.attempts),
             *(skip_row(name, why) for name, why in outcome.skipped)]
    if outcome.reference:
        lines.insert(2, f"{'float':<12} {outcome.reference[metric.key].shown:>14.4f} {'(reference)':>9}"
                     + "".join(f"  {name} {scores[metric.key].shown:.4f}" for name, scores in outcome.client_references.items()))
    if outcome.clients_note:
        lines.append(outcome.clients_note)
    lines += outcome.notes
    lines.append(f"chosen: {outcome.chosen.remedy}" if outcome.passed else
                 f"nothing passed; kept the best attempt, {outcome.chosen.remedy}")
    return "\n".join(lines)
