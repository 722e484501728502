"""A latency measurement from the device, kept in the run for its report.

    edge bench model_int8_edgetpu.tflite --edgetpu --json bench.json     (on the device)
    pipeline report RUN --latency bench.json                             (here)

The file is checked (what `edge bench --json` writes), copied to RUN/latency.json and recorded in
the manifest, so every later rewrite of the report keeps it. The report says which of the run's
models it measured, by sha256.
"""
from __future__ import annotations

import json
from pathlib import Path

from pipeline.errors import DataError
from pipeline.rundir.files import json_bytes
from pipeline.rundir.run import writing

KEY = "latency"  # the run's artifact key (pipeline/rundir/run.py names its file)
_REQUIRED = {"schema_version": int, "model": str, "model_sha256": str, "backend": str, "runs": int,
             "first_invoke_ms": float, "median_ms": float, "p90_ms": float}


def record(run_dir: Path, source: Path) -> Path:
    """Check `source` (written by `edge bench --json`), copy it into RUN and record it; returns the copy."""
    run_dir, source = Path(run_dir), Path(source)
    try:
        bench = json.loads(source.read_text())
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read latency file {source} ({err}); expected the JSON written by `edge bench MODEL --json FILE`") from err
    if not isinstance(bench, dict):
        raise DataError(f"latency file {source} holds a JSON {type(bench).__name__}; expected the object `edge bench --json` writes")
    for key, kind in _REQUIRED.items():
        value = bench.get(key)
        if not isinstance(value, (int, float) if kind is float else kind) or isinstance(value, bool):
            raise DataError(f"latency file {source}: {key!r} is {value!r}; expected {kind.__name__} "
                            "(the file `edge bench MODEL --json FILE` writes)")
    if bench["schema_version"] != 1:
        raise DataError(f"latency file {source} has schema_version {bench['schema_version']}, expected 1")
    with writing(run_dir, "pipeline report --latency") as run, run.transaction() as t:
        return t.write(KEY, json_bytes(bench))
