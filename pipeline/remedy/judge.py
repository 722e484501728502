"""The judge: whether an attempt passes the gate on the tuning split, and how well a split that small can tell.

The tuning split is harder than the held-out images (its views are new crops of training photos, and int8
parts from float on 2-3% of them where it parts on 0.6-3% of held-out images), so its agreement is judged like
with like: an attempt fails on agreement only when its disagreements are more than a model exactly at the limit
would show by chance (one-sided binomial test, `SIGNIFICANCE`). The top-1 drop is judged as the gate judges it.

A set-aside split too small to tell the limit from twice as many disagreements (`weak_judge`: 10% of 240 photos is
24 images), or whose drop varies over its images resampled by more than half the limit (`spread_note`), is said to
be a weak judge, in the table and the manifest; the held-out gate (`pipeline parity`) stays the judge then.
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Tuple

import numpy as np

from pipeline import gate
from pipeline.inference.client_scores import gate_name
from pipeline.remedy.tuning_split import TuningSplit, drawn_note

SIGNIFICANCE = 0.05  # an agreement under the limit fails only when a model at the limit shows it this rarely
WEAK_JUDGE = 0.2  # a split that passes a model parting twice as often as the limit allows this often is a weak judge


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


def split_notes(run, tuning: TuningSplit, limits: gate.GateLimits) -> List[str]:
    """What the user should know of the tuning split before the climb: that it was drawn from images the model may
    have trained on, or that it is set aside but too small to judge the agreement limit."""
    if not tuning.set_aside and (tuning.views > 1 or run.origin):  # an imported model may have fit any --data image
        return [f"note: {drawn_note(run)}"]
    if tuning.set_aside and weak_judge(len(tuning.images), limits.min_agreement) > WEAK_JUDGE:
        return [weak_note(len(tuning.images), limits.min_agreement)]
    return []


def weak_judge(n: int, min_agreement: float) -> float:
    """How often a model that parts from float twice as often as `min_agreement` allows passes a tuning split of n
    scored images (agreement under the limit fails only beyond chance, `tuning_failures`)."""
    rate = 1.0 - min_agreement
    if n <= 0 or rate <= 0:
        return 1.0 if n <= 0 else 0.0
    return float(binomial(n, min(1.0, 2 * rate))[:passing_disagreements(n, min_agreement) + 1].sum())


def binomial(n: int, p: float) -> np.ndarray:
    """P(X = 0..n) for X ~ Binomial(n, p)."""
    k = np.arange(n + 1)
    if p <= 0.0 or p >= 1.0:
        return (k == (0 if p <= 0.0 else n)).astype(float)
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])
    return np.exp(log_factorial[n] - log_factorial[k] - log_factorial[n - k] + k * math.log(p) + (n - k) * math.log1p(-p))


def passing_disagreements(n: int, min_agreement: float) -> int:
    """The most disagreements among n scored images that pass the agreement test (under the limit beyond chance only)."""
    at_least = np.cumsum(binomial(n, 1.0 - min_agreement)[::-1])[::-1]  # at_least[k] = P(X >= k)
    return int(np.sum(at_least[1:] >= SIGNIFICANCE))


def weak_note(n: int, min_agreement: float) -> str:
    needed = judging_split(min_agreement)
    enough = (f"about {needed} tuning images make the split a judge" if needed else
              f"no split under {MAX_JUDGED} images is a judge")
    return (f"note: the tuning split holds {n} images: a model that parts from float twice as often as --min-agreement "
            f"{min_agreement:g} allows passes it {weak_judge(n, min_agreement):.0%} of the time, so a pass on it says "
            f"little; `pipeline parity` (held-out) is the gate ({enough}: more data, or a larger `pipeline train "
            "--tuning-fraction`)")


MAX_JUDGED = 5000  # the largest tuning split weighed (images)


def judging_split(min_agreement: float):
    """The fewest tuning images that pass a model parting twice as often as the limit at most WEAK_JUDGE of the time
    (None: more than MAX_JUDGED)."""
    n = 8
    while n <= MAX_JUDGED:
        if weak_judge(n, min_agreement) <= WEAK_JUDGE:
            return n
        n += max(1, n // 20)
    return None


def spread_note(n: int, deviation: float, limits: gate.GateLimits) -> str:
    return (f"note: on these {n} tuning images the export's {limits.metric} drop varies by {deviation:.2f} pp (standard "
            f"deviation over the images resampled) against --max-drop {limits.max_drop:g} pp: the split cannot tell a "
            "loss at the limit from none, so a pass says little; `pipeline parity` (held-out) is the gate (more "
            "--val-data, or a larger --tuning-fraction, makes it a judge)")
