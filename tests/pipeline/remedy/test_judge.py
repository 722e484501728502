"""The remedy ladder's judge (pipeline/remedy/judge.py): agreement on the tuning split fails only beyond chance (a
binomial tail), the drop as the gate judges it, and each gated client against the float model fed as it feeds."""
from __future__ import annotations

import pytest

from pipeline.tasks.classify.scores import METRICS

pytestmark = pytest.mark.host


def test_chance_of_at_least_is_the_binomial_tail():
    from fractions import Fraction
    from math import comb

    from pipeline.remedy.judge import chance_of_at_least

    for n, k, rate in ((20, 3, 0.02), (50, 0, 0.1), (50, 7, 0.1), (30, 30, 0.5)):
        r = Fraction(rate)
        exact = sum(comb(n, i) * r ** i * (1 - r) ** (n - i) for i in range(k, n + 1))
        assert abs(chance_of_at_least(k, n, rate) - float(exact)) < 1e-9


def test_the_tuning_split_fails_agreement_only_beyond_chance_and_drop_as_the_gate_does():
    from pipeline import gate
    from pipeline.remedy.judge import tuning_failures

    def scores(correct, agree, n=960):
        return {"top1": gate.Score.counted(correct, n), gate.AGREEMENT: gate.Score.counted(agree, n),
                "macro_f1": gate.Score.counted(correct, n)}

    reference = scores(900, 960)
    # 22 of 960 off (2.3%, under 0.98): a model at exactly 2% shows that often (p 0.29), so it is no failure.
    assert tuning_failures(scores(900, 938), reference, gate.GATE, METRICS) == []
    # 30 off: p 0.013, a failure that says so.
    (line,) = tuning_failures(scores(900, 930), reference, gate.GATE, METRICS)
    assert "beyond chance" in line and "930 of 960" in line
    # The drop is judged as the gate judges it: 2 pp lost fails whatever the agreement.
    (line,) = tuning_failures(scores(881, 960), reference, gate.GATE, METRICS)
    assert "drop" in line


def test_tuning_failures_judge_each_gated_client_like_the_int8_model():
    from pipeline import gate
    from pipeline.remedy.judge import tuning_failures

    def scores(correct, agree, n=960):
        return {"top1": gate.Score.counted(correct, n), gate.AGREEMENT: gate.Score.counted(agree, n),
                "macro_f1": gate.Score.counted(correct, n)}

    reference = scores(900, 960)
    # Each client against the float model fed as that client feeds it: its own reference, not the contract's.
    fed_float = scores(880, 960)
    assert tuning_failures(scores(900, 950), reference, gate.GATE, METRICS,
                           {"pycoral": (scores(879, 950), fed_float)}) == []
    lines = tuning_failures(scores(900, 950), reference, gate.GATE, METRICS,
                            {"pycoral": (scores(879, 950), fed_float), "mediapipe": (scores(860, 920), fed_float)})
    assert len(lines) == 2 and all(line.startswith("client_mediapipe: ") for line in lines), lines
    assert "drop" in lines[0] and "beyond chance" in lines[1]
