"""The cost model's fitted numbers, as data: coefficients.json beside this module, written by bench/edgetpu_cost/fit.py
(which says what each number was fitted on and how far it is from what it was not fitted on:
bench/results/edgetpu_cost.md). Nothing here is tuned by hand.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pipeline.edgetpu.cost.layout import Layout

PATH = Path(__file__).with_name("coefficients.json")


@lru_cache(maxsize=1)
def load() -> dict:
    return json.loads(PATH.read_text())


def layout() -> Layout:
    d = load()["layout"]
    return Layout(d["out_multiple"], d["in_multiple"], d["per_channel_bytes"], d["capacity_bytes"])


def version() -> str:
    return load()["version"]
