"""Why nothing passed (classification): the float model's near ties. When no rung passes, the outcome says how many
tuning answers are near ties of the float model, which an int8 model as noisy as the best attempt flips about half
of, and that a float model that decides more clearly (more training images; more epochs only while held-out
accuracy rises) is the repair.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

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
