"""The parity gate: may a smaller model ship in place of the reference? One verdict, for parity, `pipeline run`
and the report.

    scores = {name: classification_scores(entry) for name, entry in models.items()}
    failures = check(scores, limits, CLASSIFICATION, Floor(majority(labels, names), limits.min_accuracy))
    enforce(failures)                                     # GateFailed: "parity gate failed: ..."

The gate sees each model as named metric values (`Score`s: exact, so a limit sits exactly where the user put
it, 1 image in 100 is 1 pp and not 1.0000000000000009) and the limits; it knows nothing of classes. It fails a
gated model (GATED) whose `limits.metric` drops more than `limits.max_drop` points below the reference's, or
whose "agreement" (the share of answers that match the reference's) is under `limits.min_agreement`; and,
before those, any model (the reference too) under the floor: better than always answering the most frequent
held-out class, or --min-accuracy. A task names its metrics (`Metric`) and turns its report entries into
scores: classification's are `CLASSIFICATION` and `classification_scores` below; another task brings its own
(a detector: mAP@.5, agreement by IoU) and the same `check`.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

from pipeline.errors import ConfigError, PipelineError

REFERENCE = "float_savedmodel"  # the model every other is compared with
GATED = ("int8_cpu", "edgetpu", "device_cpu")  # the models the gate applies to (the float TFLite model is reported only)
AGREEMENT = "agreement"  # the score every task gives: how often a model answers as the reference does


class GateFailed(PipelineError):
    """A gated model lost more than the limits allow, or a model is under the floor. Reports were written."""


class Metric(NamedTuple):
    key: str  # the name a task gives its score, and --gate-metric's value
    drop: str  # in a failure line: "<drop> drop 2.00 pp"
    short: str  # in tables and at the floor: "<short> 0.9400"


# Classification's metrics; --gate-metric chooses the one --max-drop limits.
CLASSIFICATION = {m.key: m for m in (Metric("top1", "accuracy", "top-1"), Metric("macro_f1", "macro-F1", "macro-F1"))}
GATE_METRICS = tuple(CLASSIFICATION)


class GateLimits(NamedTuple):
    max_drop: float  # percentage points of the gate metric a gated model may lose against the reference
    min_agreement: float  # share of answers that must match the reference's
    metric: str  # what max_drop limits: one of the task's metrics (GATE_METRICS for classification)
    min_accuracy: Optional[float] = None  # the floor on top-1; None: better than always answering the majority class

    def validate(self, metrics: Mapping[str, Metric] = CLASSIFICATION) -> "GateLimits":
        if not 0 <= self.min_agreement <= 1:
            raise ConfigError(f"--min-agreement {self.min_agreement}, expected a share between 0 and 1")
        if self.max_drop < 0:
            raise ConfigError(f"--max-drop {self.max_drop}, expected percentage points >= 0")
        if self.min_accuracy is not None and not 0 <= self.min_accuracy <= 1:
            raise ConfigError(f"--min-accuracy {self.min_accuracy}, expected a share between 0 and 1")
        if self.metric not in metrics:
            raise ConfigError(f"--gate-metric {self.metric!r}, expected one of {', '.join(metrics)}")
        return self


GATE = GateLimits(max_drop=1.0, min_agreement=0.98, metric="top1")  # the defaults


class Score(NamedTuple):
    """One model's value of one metric: exact for the gate, as the report shows it for people."""

    exact: Fraction
    shown: float  # the report's own number (the failure lines print it, so they say what the report says)
    count: Optional[int] = None  # a counted score: `count` of `total` `unit`
    total: Optional[int] = None
    unit: str = "images"

    @classmethod
    def counted(cls, count: int, total: int, unit: str = "images") -> "Score":
        return cls(Fraction(count, total), count / total, count, total, unit)

    def describe(self) -> str:
        if self.count is None:
            return f"{self.shown:.4f}"
        return f"{self.shown:.4f} ({self.count} of {self.total} {self.unit})"

    def drop_from(self, reference: "Score") -> str:
        """How far under `reference` this score is, in points x 100, with what it counts."""
        if self.count is not None and reference.count is not None and self.total == reference.total:
            lost = reference.count - self.count
            return f"{lost * 100 / self.total:.2f} pp ({lost} of {self.total} {self.unit})"
        return f"{(reference.shown - self.shown) * 100:.2f} pp ({reference.shown:.4f} -> {self.shown:.4f})"


class FloorWords(NamedTuple):
    """How the floor's lines and report entry name a task's chance."""

    key: str  # the chance's entry in parity/report.json's gate.floor
    nothing: str  # "<model> is no better than <nothing>, <chance.describe()>"
    rule: str  # gate.floor.rule without --min-accuracy
    min_rule: str = "--min-accuracy"  # gate.floor.rule with it
    min_note: str = ""  # after "is under --min-accuracy X"


class Floor(NamedTuple):
    """The least score a model must reach: above chance, or --min-accuracy. `chance` is what a model that learned
    nothing scores, by the task's own measure (training/chance.py's Majority for a classifier, the detect task's
    NoSkill for a detector): its `exact` score to beat, the `rate` shown, `describe()`, `brief()`, `as_dict()` and
    its `words` (FloorWords)."""

    chance: Any
    min_accuracy: Optional[float]  # None: strictly better than chance
    metric: Metric = CLASSIFICATION["top1"]

    def failure(self, name: str, score: Score) -> Optional[str]:
        """What is wrong with `score` (on the images chance was counted on), or None."""
        said = f"{name}: {self.metric.short} {score.describe()}"
        if self.min_accuracy is None:
            if score.exact > self.chance.exact:
                return None
            return f"{said} is no better than {self.chance.words.nothing}, {self.chance.describe()}"
        if score.exact >= Fraction(str(self.min_accuracy)):
            return None
        return f"{said} is under --min-accuracy {self.min_accuracy:g}{self.chance.words.min_note}"

    def describe(self) -> str:
        if self.min_accuracy is None:
            return f"{self.metric.short} > {self.chance.rate:.4f} ({self.chance.brief()})"
        return f"{self.metric.short} >= {self.min_accuracy:g}"

    def as_dict(self) -> Dict[str, object]:
        words = self.chance.words
        return {"min_accuracy": self.min_accuracy, words.key: self.chance.as_dict(),
                "rule": words.rule if self.min_accuracy is None else words.min_rule}


def check(scores: Mapping[str, Mapping[str, Score]], limits: GateLimits, metrics: Mapping[str, Metric],
          floor: Optional[Floor] = None, reference: str = REFERENCE, gated: Sequence[str] = GATED) -> List[str]:
    """The failed limits, one line each: the floor first (a model no better than chance is the news, whatever the
    gated models do next to it), then each gated model's drop and agreement."""
    failures = []
    if floor is not None:
        for name in (reference, *gated):
            if name in scores:
                failure = floor.failure(name, scores[name][floor.metric.key])
                if failure:
                    failures.append(failure)
    metric, max_drop, min_agreement = metrics[limits.metric], Fraction(str(limits.max_drop)), Fraction(str(limits.min_agreement))
    for name in gated:
        if name not in scores:
            continue
        mine, theirs = scores[name][metric.key], scores[reference][metric.key]
        if (theirs.exact - mine.exact) * 100 > max_drop:
            failures.append(f"{name}: {metric.drop} drop {mine.drop_from(theirs)} exceeds --max-drop {limits.max_drop:g} pp")
        agreement = scores[name][AGREEMENT]
        if agreement.exact < min_agreement:
            failures.append(f"{name}: {AGREEMENT} {agreement.describe()} is under --min-agreement {limits.min_agreement:g}")
    return failures


def record(limits: GateLimits, floor: Optional[Floor], present: Sequence[str], failures: List[str],
           gated: Sequence[str] = GATED) -> Dict[str, Any]:
    """The gate as parity/report.json records it (`gated`: the names check was given)."""
    gate: Dict[str, Any] = {"metric": limits.metric, "max_drop_pp": limits.max_drop, "min_agreement": limits.min_agreement}
    if floor is not None:
        gate.update(floor=floor.as_dict(), floor_rule=floor.describe())
    gate.update(applies_to=[m for m in gated if m in present], passed=not failures, failures=failures)
    return gate


def enforce(failures: List[str]) -> None:
    """GateFailed (exit 1) when any limit failed; the command has printed its reports before."""
    if failures:
        raise GateFailed("parity gate failed: " + "; ".join(failures))


# --- classification's scores -------------------------------------------------------------------------------


def classification_scores(entry: Mapping[str, Any]) -> Dict[str, Score]:
    """A classifier's parity model entry (pipeline/tasks/classify/parity.py) as the gate sees it: top-1 and agreement counted in images, and
    macro-F1 exactly from the per-class counts (with --max-drop 1, 0.90 -> 0.89 passes and 0.90 -> 0.8899 fails)."""
    from edge.answers.metrics import counts_of, macro_f1_exact

    return {"top1": Score.counted(entry["correct"], entry["images"]),
            AGREEMENT: Score.counted(entry["agree"], entry["images"]),
            "macro_f1": Score(macro_f1_exact(counts_of(entry["per_class"])), entry["macro_f1"])}
