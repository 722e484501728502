"""A latency measurement from the device, kept in the run for its report.

    edge bench model_int8_edgetpu.tflite --edgetpu --json bench.json     (on the device)
    pipeline report RUN --latency bench.json                             (here)

The file is checked by its reader (edge/documents/latency.py, beside its writer), copied to RUN/latency.json and
recorded in the manifest, so every later rewrite of the report keeps it. The report says which of the
run's models it measured, by sha256.
"""
from __future__ import annotations

from pathlib import Path

from edge.documents.latency import read_latency
from pipeline.rundir.files import json_bytes
from pipeline.rundir.run import writing

KEY = "latency"  # the run's artifact key (pipeline/rundir/run.py names its file)


def record(run_dir: Path, source: Path) -> Path:
    """Check `source` (written by `edge bench --json`), copy it into RUN and record it; returns the copy."""
    bench = read_latency(Path(source))
    with writing(Path(run_dir), "pipeline report --latency") as run, run.transaction() as t:
        return t.write(KEY, json_bytes(bench))
