"""What parity advises when int8 loses, sized to what can judge the repair.

A client's loss: `pipeline export RUN --int8 --remedy --clients NAME` chooses a repair on the run's tuning split, so
it is named alone only where that split can see the loss, that is where a model losing as much as int8 fed as NAME
feeds loses on the held-out images fails the ladder's judge (remedy.judge) on the split at least 1 - WEAK_JUDGE of
the time. Otherwise the advice says how many tuning images can see it and how to get them (a larger
--tuning-fraction, or more images), then the remedy. (Small CNN, 32 px photo crops: MediaPipe lost 5 pp on 160
held-out images; the ladder judged 24 tuning images, where such a loss passes most of the time, kept the export as
asked, and MediaPipe still lost 5 pp.)

The int8 model's own loss on held-out: when the float model's near ties (remedy.near_ties) predict an agreement
under the gate's, no export keeps those answers; a float model trained on more images leaves fewer near ties.
"""
from __future__ import annotations

import math
from typing import Dict, Optional

import numpy as np

from pipeline import gate
from pipeline.remedy.judge import WEAK_JUDGE, binomial, passing_disagreements
from pipeline.remedy.near_ties import near_ties

ADVISED_FROM_PP = 2.0  # parity_report.CLIENT_GAP_PP: int8's loss under a client's feed that brings remedy advice
MAX_SPLIT = 5000  # beyond this many tuning images, no split is advised (a loss that small is not one to chase)
MAX_SHARE = 0.5  # the largest --tuning-fraction advised: more would leave less than half of the images to train on


def chance_to_pass(n: int, loses: float, gains: float, limits: gate.GateLimits = gate.GATE) -> float:
    """How often a model that parts from float by losing an answer on `loses` of images and gaining one on `gains`
    passes a tuning split of n images as the ladder judges it: its drop within --max-drop (as the gate judges it) and
    its disagreements not beyond chance for a model at --min-agreement (remedy.judge.tuning_failures)."""
    most = passing_disagreements(n, limits.min_agreement)
    allowed_drop = math.floor(n * limits.max_drop / 100 + 1e-9)
    lost = binomial(n, loses)
    total = 0.0
    for l in range(min(n, most) + 1):
        gained = binomial(n - l, gains / (1.0 - loses)) if loses < 1.0 else np.zeros(1)
        low, high = max(0, l - allowed_drop), min(n - l, most - l)
        if low <= high:
            total += lost[l] * gained[low:high + 1].sum()
    return float(min(1.0, total))


def split_to_judge(loses: float, gains: float, limits: gate.GateLimits = gate.GATE) -> Optional[int]:
    """The fewest tuning images on which such a model passes at most WEAK_JUDGE of the time (None: over MAX_SPLIT)."""
    n = 8
    while n <= MAX_SPLIT:
        if chance_to_pass(n, loses, gains, limits) <= WEAK_JUDGE:
            return n
        n += max(1, n // 20)
    return None


def _split_facts(manifest: dict) -> Optional[Dict[str, object]]:
    """The run's tuning split: how many images, the pool it was drawn from (a trained run's --data; an imported
    run's --val-data) and the stage whose --tuning-fraction draws it."""
    split = ((manifest.get("data") or {}).get("split")) or {}
    if "tuning_examples" not in split:
        return None
    n = int(split["tuning_examples"])
    if split.get("tuning_from"):  # imported: a share of --val-data, the rest held out
        return {"images": n, "pool": n + int(split.get("heldout_examples", 0)), "stage": "import"}
    return {"images": n, "pool": n + int(split.get("train_examples", 0)), "stage": "train"}


def client_remedy(name: str, alike: dict, manifest: dict, limits: gate.GateLimits = gate.GATE) -> Dict[str, object]:
    """The remedy advice for a client whose feed costs int8 more than the float model fed alike (parity's
    `float_fed_alike` row): {"remedy": the words naming the command, "tuning_judge": the numbers}, or {} when the
    run records no tuning split (parity then words it as before)."""
    facts = _split_facts(manifest)
    if facts is None or "agreement" not in alike or alike["int8_drop_pp"] <= ADVISED_FROM_PP:
        return {}  # no remedy is advised for a loss this small (parity_report.client_advice)
    drop = max(0.0, alike["int8_drop_pp"] / 100)
    parts = max(drop, 1.0 - alike["agreement"])
    loses, gains = (parts + drop) / 2, (parts - drop) / 2  # every disagreement a lost or a gained answer
    n = int(facts["images"])
    seen = chance_to_pass(n, loses, gains, limits) if n else 1.0
    needed = split_to_judge(loses, gains, limits)
    judge = {"tuning_images": n, "passes": round(seen, 4), "images_to_judge": needed,
             "max_drop_pp": limits.max_drop, "min_agreement": limits.min_agreement}
    command = f"`pipeline export RUN --int8 --remedy --clients {name}`"
    unseen = f"the remedy (export's --remedy --clients {name}) cannot"
    if seen <= WEAK_JUDGE:
        ladder = manifest.get("remedy") or {}
        if name in (ladder.get("clients") or []):
            return {"remedy": _judged_already(name, ladder, n), "tuning_judge": judge}
        return {"remedy": f"{command} repairs it with {name} judged", "tuning_judge": judge}
    like = (f"a model losing as much there as int8 as {name} loses on the held-out images ({drop * 100:.2f} pp, "
            f"agreeing on {alike['agreement']:.1%}) passes them {seen:.0%} of the time")
    if needed is None:
        words = (f"{unseen} repair it: it chooses on the run's {n} tuning images, and {like}; no tuning split under "
                 f"{MAX_SPLIT} images tells this loss from none, so nothing edgeflow runs can check a repair")
        return {"remedy": words, "tuning_judge": judge}
    pool, stage = int(facts["pool"]), facts["stage"]
    # The split is a seeded hash of each image's identity, so a share draws about share * pool: two standard
    # deviations more make `needed` or more likely (halftone case: --tuning-fraction 0.2 of 240 drew 45).
    aside = needed + 2 * math.sqrt(needed)
    share = aside / pool
    default = 0.1
    if share <= MAX_SHARE:
        fraction = math.ceil(share * 100) / 100
        how = (f"train again with about {round(fraction * pool)} of the {pool} images set aside, `pipeline {stage} ... "
               f"--tuning-fraction {fraction:g}` (or gather more: {math.ceil(aside / default)} images at the default "
               f"{default:g})")
    else:
        how = (f"these {pool} images cannot give that many without training on fewer than half: gather more, at least "
               f"{math.ceil(aside / MAX_SHARE)} images for `pipeline {stage} ... --tuning-fraction {MAX_SHARE:g}` "
               f"({math.ceil(aside / default)} at the default {default:g})")
    words = (f"{unseen} see this loss yet: it chooses on the run's {n} tuning images, and {like}; {needed} tuning "
             f"images can tell it (such a model passes them at most {WEAK_JUDGE:.0%} of the time): {how}, then {command}")
    return {"remedy": words, "tuning_judge": judge}


def _judged_already(name: str, ladder: dict, n: int) -> str:
    """The words for a loss the remedy ladder already judged with this client on a split that sees it: no export
    edgeflow runs repairs it (nothing passed), or the rung it chose passed the split and not held-out."""
    if not ladder.get("passed"):
        found = (f"`export --remedy --clients {name}` judged {name} on this run's {n} tuning images, which can see a loss "
                 f"like this, and no rung repaired it (it kept the best, {ladder.get('chosen')})")
    else:
        found = (f"`export --remedy --clients {name}` chose {ladder.get('chosen')} on this run's {n} tuning images, "
                 "which can see a loss like this, and held-out still shows it")
    return (f"{found}: nothing edgeflow's export runs repairs it, the loss is {name}'s feed of this model; training for "
            f"that feed (--client-fits), a larger --image-size (less shrink), or {name} fed pictures near the input "
            "size may")


def held_out_ties(reference: np.ndarray, int8: np.ndarray, manifest: dict, limits: gate.GateLimits) -> Dict[str, object]:
    """The float model's near ties on the held-out images (remedy.near_ties) and, where they predict an agreement under
    --min-agreement whatever the export, how many training images should leave few enough: the report's
    "near_ties", or {} when they do not explain a failure."""
    ties = near_ties(reference, int8)
    if ties["expected_agreement"] >= limits.min_agreement or not ties["near_ties"]:
        return {}
    trained = int((((manifest.get("data") or {}).get("split")) or {}).get("train_examples", 0))
    share = ties["near_ties"] / ties["images"]
    target = 2.0 * (1.0 - limits.min_agreement)  # near ties an int8 model flipping half of them can afford
    # The near ties' share fell faster than 1 / training images where measured (MobileNetV2 0.35, 96 px photo crops:
    # 13 of 160 trained on 216, 5 trained on 432; bench/results/remedy.md section 12), so this is an upper bound.
    wanted = math.ceil(trained * share / target) if trained and target > 0 else None
    return {**ties, "trained_on": trained or None, "train_on": wanted,
            "tuning_fraction": ((manifest.get("data") or {}).get("split") or {}).get("tuning_fraction")}


def more_images_line(report: dict) -> str:
    """Parity's last words when int8 fails on held-out because float hesitates: why, and the repair, or ""."""
    ties = report.get("near_ties")
    if not ties or report["gate"]["passed"]:
        return ""
    share = ties["near_ties"] / max(1, ties["images"])
    line = (f"why: {ties['near_ties']} of {ties['images']} held-out answers ({share:.1%}) are near ties of the float "
            f"model (top-2 margin under {ties['noise']:g}, the shift int8 makes on 95% of images); an int8 model that "
            f"noisy flips about half of them, so it agrees on about {ties['expected_agreement']:.1%} (limit "
            f"{report['gate']['min_agreement']:g}) however it is exported: no `export --remedy` rung repairs that. A float "
            f"model that decides more clearly does")
    if ties.get("train_on") and ties.get("trained_on"):
        fraction = ties.get("tuning_fraction") or 0.0
        total = math.ceil(ties["train_on"] / (1.0 - fraction))
        line += (f": train on about {ties['train_on']} images (this run trained on {ties['trained_on']}; "
                 f"{total} with {fraction:g} set aside for tuning), then export and run parity again")
    return line
