"""The count task's `pipeline predict`: the int8 model's count for each picture file, written as JSON."""
from __future__ import annotations

import json
import time
from pathlib import Path

from pipeline.errors import ConfigError
from tests.pipeline.tasks.count import data


def predict(config, run):
    from edge import dequantize, make_interpreter

    if config.model != "int8":
        raise ConfigError(f"--model {config.model}: the count task predicts with its int8 model")
    start = time.monotonic()
    interpreter = make_interpreter(str(run.artifact("model_int8")))
    loaded = time.monotonic() - start
    files = sorted(p for spec in config.data for p in (Path(spec).glob("*.png") if Path(spec).is_dir() else [Path(spec)]))
    start = time.monotonic()
    counts = []
    for path in files:
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], data.pixels(path.read_bytes())[None])
        interpreter.invoke()
        out = interpreter.get_output_details()[0]
        counts.append(float(dequantize(interpreter.get_tensor(out["index"]), *out["quantization"]).reshape(-1)[0]))
    seconds = time.monotonic() - start
    Path(config.out).write_text(json.dumps({"predictions": [{"id": p.name, "count": c} for p, c in zip(files, counts)]}))
    return Path(config.out), "json", len(files), [], loaded, seconds, "the int8 model on the CPU interpreter"
