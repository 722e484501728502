"""How many decode workers a command runs: by default one per core this process may use (one fewer when the CPU
interpreter runs the model), or what `--workers N` says.

    from edge.files.workers import checked_workers, default_workers
    workers = checked_workers(option_value, edgetpu=loaded.edgetpu)  # None -> default_workers(); 0 or less -> InputError

The workers are threads (edge.files.prefetch): Pillow's JPEG decode and resize run with the GIL released, so
threads decode in parallel (bench/results/edge_throughput.md measures threads against processes).
"""
from __future__ import annotations

import os
from typing import Optional

from edge.errors import InputError


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system has one (Linux), else every core
    (macOS has no sched_getaffinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def default_workers(edgetpu: bool = True) -> int:
    """One decode worker per available core when the Edge TPU runs the model: the invoke waits on it with the GIL
    released, so decoding may use every core. One fewer (at least 1) on the CPU interpreter, whose invoke takes a
    core of its own: on 2 cores 1 worker beat 2 for every model measured (bench/results/edge_throughput.md)."""
    cores = available_cores()
    return cores if edgetpu else max(1, cores - 1)


def checked_workers(workers: Optional[int], option: str = "--workers", edgetpu: bool = True) -> int:
    """`workers`, or the default for the interpreter (`edgetpu`: the Edge TPU delegate runs the model) when None;
    InputError for 0 or a negative count."""
    if workers is None:
        return default_workers(edgetpu)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"{option} {workers!r}, expected a whole number of decode workers, 1 or more "
                         f"(default: one per core this process may use, {available_cores()}, one fewer on the CPU "
                         "interpreter)")
    return workers
