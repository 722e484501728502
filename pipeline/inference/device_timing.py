"""The device's time per inference, brought back by `pipeline parity --device-results`: measured beside predicted.

    edge bench model_int8_edgetpu.tflite --edgetpu --json bench.json                  (on the device)
    pipeline parity RUN --device-results predictions.json --device-results bench.json (here; either file alone too)

`edge evaluate` writes the answers and no time; `edge bench --json` writes the time. `--device-results` takes
either or both, told apart by what they hold (`sort`). The time is checked (edge/documents/latency.py), must be of one
of this run's models (by sha256), is kept as RUN/latency.json (the manifest records it, so every later report shows
it), and is put beside the cost model's prediction in parity/report.json and the printed summary
(pipeline/report/predicted.py: only an Edge TPU measurement of the compiled model is called an error of it).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, NamedTuple, Optional, Sequence

from edge.documents.latency import read_latency
from pipeline.errors import ConfigError, DataError
from pipeline.report import latency, predicted
from pipeline.rundir.files import json_bytes

_KINDS = "the answers from `edge evaluate --out FILE` and the time from `edge bench MODEL --json FILE`"


class DeviceFiles(NamedTuple):
    predictions: Optional[Path]  # `edge evaluate --out`
    timing: Optional[Path]  # `edge bench --json`


def _is_timing(path: Path) -> bool:
    """A latency document (`edge bench --json`) rather than a predictions one. An unreadable file is left to the
    predictions reader, which names what is wrong with it."""
    try:
        document = json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and "median_ms" in document and "predictions" not in document


def sort(paths: Sequence[str]) -> DeviceFiles:
    """The files given to --device-results, by kind; at most one of each."""
    answers = [Path(p) for p in paths if not _is_timing(Path(p))]
    times = [Path(p) for p in paths if _is_timing(Path(p))]
    for kind, found in (("answers (edge evaluate)", answers), ("timings (edge bench --json)", times)):
        if len(found) > 1:
            raise ConfigError(f"--device-results got {len(found)} files of {kind}: {', '.join(map(str, found))}; "
                              f"expected at most one of each of {_KINDS}")
    return DeviceFiles(answers[0] if answers else None, times[0] if times else None)


class Measured(NamedTuple):
    path: Path
    bench: Dict[str, Any]  # the latency document as read
    model_key: str  # the run's artifact it timed

    def record(self, run) -> dict:
        """Keep the document as RUN/latency.json (inside the stage's hold on RUN) and return what parity's report holds
        of it: the measurement, the device that measured it, and the prediction beside it."""
        with run.transaction() as t:
            t.write(latency.KEY, json_bytes(self.bench))
        recorded = json.loads(run.artifact("edgetpu_report").read_text()) if run.has("edgetpu_report") else None
        compared = predicted.beside(self.bench, recorded, self.model_key)
        return {"file": str(self.path), "model": self.model_key, "backend": self.bench.get("backend"),
                "edgetpu": bool(self.bench.get("edgetpu")), "machine": self.bench.get("machine"),
                "median_ms": float(self.bench["median_ms"]), "p90_ms": float(self.bench["p90_ms"]),
                "runs": self.bench.get("runs"), "measured_on": predicted.measured_on(self.bench, self.model_key),
                "predicted": compared, "line": predicted.line(compared, self.bench)}


def read(path: Path, run) -> Measured:
    """`path` checked before any work: the document's form, and that it timed one of this run's models."""
    path = Path(path)
    bench = read_latency(path)
    key = next((k for k in run.recorded() if k != latency.KEY and run.entry(k).get("sha256") == bench["model_sha256"]), None)
    if key is None:
        models = ", ".join(k for k in run.recorded() if k.startswith("model_")) or "none recorded"
        raise DataError(f"device timings {path} are of a model (sha256 {bench['model_sha256'][:12]}…) that is not one of "
                        f"this run's ({models}); expected `edge bench MODEL --json FILE` of a model from this run's bundle")
    return Measured(path, bench, key)


def summary(recorded: Optional[dict]) -> str:
    """The line parity prints under its table ('' without a timing)."""
    return f"\ndevice time: {recorded['line']}" if recorded else ""
