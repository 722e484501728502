"""Timing a model on this device: what `edge bench` reports, and what bench/edge/speed.py sets beside
the command's own rate.

    runner = Runner.open("model_int8.tflite")
    feed_seeded_input(runner.interpreter)
    ms = [t * 1000 for t in invoke_seconds(runner.interpreter, runs=50)]
    end_to_end_rate(runner, image_paths)      # images/s through what `edge evaluate` does per image
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, List, Sequence

import numpy as np

from edge.answers.classify import input_details, invoke


def feed_seeded_input(interpreter: Any) -> None:
    """A fixed seeded input: latency does not depend on pixel values, and runs stay comparable."""
    details = input_details(interpreter)
    rng = np.random.default_rng(0)
    dtype = np.dtype(details["dtype"])
    if dtype.kind == "f":
        sample = rng.uniform(0, 255, size=details["shape"]).astype(dtype)
    else:
        info = np.iinfo(dtype)
        sample = rng.integers(info.min, info.max, size=details["shape"], endpoint=True).astype(dtype)
    interpreter.set_tensor(details["index"], sample)
    invoke(interpreter, "a seeded random input")


def invoke_seconds(interpreter: Any, runs: int) -> List[float]:
    """Seconds of each of `runs` invokes on the input already set: the bare invoke, nothing around it."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - start)
    return times


def end_to_end_rate(runner: Any, files: Sequence[Path]) -> float:
    """Images per second through the runner's score loop (edge.answers.runner.Runner.score_files: decode and resize
    ahead on one worker thread per core, set_input, invoke, get_scores). A file that cannot be read is an error here: a
    benchmark must not skip work."""
    start = time.perf_counter()
    for _, _, error in runner.score_files(files):
        if error is not None:
            raise error
    return len(files) / (time.perf_counter() - start)
