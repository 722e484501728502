"""Why nothing passed (pipeline/remedy/near_ties.py): the float model's near ties, which an int8 model as noisy as
the best attempt flips about half of."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.host


def test_near_ties_count_the_answers_int8_noise_can_flip_and_what_they_cost():
    """Float answers with margins 0.02 (near ties) and 0.6; an int8 model that moves every margin by +-0.05:
    the near ties are counted, and half of them are expected to flip."""
    from pipeline.remedy.near_ties import near_ties, ties_line

    n = 200
    margins = np.where(np.arange(n) < 40, 0.02, 0.6)
    reference = np.stack([(1 + margins) / 2, (1 - margins) / 2, np.zeros(n)], axis=1)
    shift = np.where(np.arange(n) % 2 == 0, 0.05, -0.05)
    outputs = reference + np.stack([shift / 2, -shift / 2, np.zeros(n)], axis=1)
    ties = near_ties(reference, outputs)
    assert ties["images"] == n and ties["near_ties"] == 40 and ties["noise"] == pytest.approx(0.05)
    assert ties["expected_agreement"] == pytest.approx(1 - 0.5 * 40 / n)
    line = ties_line(ties, 0.98)
    assert "40 of 200" in line and "90.0%" in line
    assert "train on more images (or longer, while held-out accuracy still rises)" in line
