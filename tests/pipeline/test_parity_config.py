"""`pipeline parity`'s options are refused like every stage's: ConfigError, one line, before any work."""
from __future__ import annotations

import pytest

from pipeline.errors import ConfigError
from pipeline.parity import ParityConfig


@pytest.mark.parametrize("options, named", [
    ({"top_k": 0}, "--top-k 0"),
    ({"top_k": True}, "--top-k True"),
    ({"threads": 0}, "--threads 0"),
    ({"max_drop": -1.0}, "--max-drop -1.0"),
    ({"min_agreement": 1.5}, "--min-agreement 1.5"),
    ({"gate_metric": "recall"}, "--gate-metric 'recall'"),
])
def test_an_option_out_of_range_is_a_config_error_naming_it(options, named):
    with pytest.raises(ConfigError, match="^" + named.replace("(", r"\(")) as caught:
        ParityConfig(**options).validate()
    assert caught.value.exit_code == ConfigError.exit_code < 128 and "expected" in str(caught.value)


def test_the_defaults_pass_and_give_the_gate_limits():
    limits = ParityConfig(top_k=1, threads=2).validate()
    assert (limits.max_drop, limits.min_agreement, limits.metric) == (1.0, 0.98, "top1")
