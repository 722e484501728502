"""How much edge/'s classify functions add over a bare interpreter loop, on an int8 MobileNetV2.

    /work/venv/bin/python bench/edge/overhead.py              # builds the model (about a minute)
    /work/venv/bin/python bench/edge/overhead.py --model m.tflite --rounds 40

Host only (TensorFlow builds the model: tf_keras MobileNetV2 1.0 at 224, weights=None so nothing
downloads, raw-pixel input through Rescaling(1/127.5, -1) like the project's models, converted as
`pipeline export --int8` converts it: Coral's input wrapper, uint8 input scale 1/128 zero point 128,
full int8 at batch 1; bench/export/as_exported.py). Both loops run on the same interpreter, interleaved round by round so
drift in machine load hits both alike:
  edge  set_input(interpreter, uint8 image array); invoke(); get_scores(interpreter)
  bare  set_tensor(index, image[None]); invoke(); get_tensor(output index)
The ratio is median(edge) / median(bare) over every timed iteration; the target is <= 1.05.
Writes bench/results/edge_overhead.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "edge_overhead.md"
sys.path.insert(0, str(ROOT))

from bench.edge.machine import lscpu_head, source_commit  # noqa: E402


def build_model(path: Path) -> Path:
    """MobileNetV2 (raw pixels in, Rescaling first) as `pipeline export --int8` converts it (bench/export/as_exported.py)."""
    import tf_keras as keras

    from bench.export.as_exported import int8_as_exported

    keras.utils.set_random_seed(0)
    inputs = keras.Input((224, 224, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)
    outputs = keras.applications.MobileNetV2(input_shape=(224, 224, 3), weights=None, classes=1000)(x)
    model = keras.Model(inputs, outputs)
    calibration = np.random.default_rng(0).integers(0, 256, size=(8, 224, 224, 3), dtype=np.uint8)
    path.write_bytes(int8_as_exported(model, 224, calibration))
    return path


def measure(model: Path, rounds: int, per_round: int, threads: int):
    from edge import get_scores, make_interpreter, set_input
    from edge.model.interpreter import backend_name

    interpreter = make_interpreter(model, edgetpu=False, threads=threads)
    ind, outd = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    image = np.random.default_rng(1).integers(0, 256, size=(224, 224, 3), dtype=np.uint8)
    in_index, out_index = ind["index"], outd["index"]
    batch = image[None]

    def edge_once():
        set_input(interpreter, image)
        interpreter.invoke()
        return get_scores(interpreter)

    def bare_once():
        interpreter.set_tensor(in_index, batch)
        interpreter.invoke()
        return interpreter.get_tensor(out_index)

    for _ in range(5):  # warm-up: first invokes allocate and fill caches
        edge_once()
        bare_once()
    edge_times, bare_times = [], []
    for r in range(rounds):
        # Alternate which loop goes first so neither always runs on a warmer cache.
        order = [(edge_once, edge_times), (bare_once, bare_times)]
        if r % 2:
            order.reverse()
        for fn, sink in order:
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                sink.append(time.perf_counter() - t0)
    return backend_name(), ind["quantization"], edge_times, bare_times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="an int8 .tflite with uint8 input to use instead of building MobileNetV2")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-write", action="store_true", help="print only; do not write bench/results/edge_overhead.md")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or build_model(Path(tmp) / "mobilenet_v2_int8.tflite")
        size = model.stat().st_size
        backend, quant, edge_t, bare_t = measure(model, args.rounds, args.per_round, args.threads)
    edge_ms, bare_ms = statistics.median(edge_t) * 1000, statistics.median(bare_t) * 1000
    ratio = edge_ms / bare_ms
    script = Path(sys.argv[0]).resolve()
    command = " ".join(["python", str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else str(script)] + sys.argv[1:])
    lines = [
        "# edge/ overhead over a bare interpreter loop",
        "",
        f"- date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}, at commit {source_commit()}",
        f"- command: `{command}`",
        f"- model: {'MobileNetV2 1.0 224, tf_keras, weights=None, Rescaling(1/127.5, -1) first, int8 as `pipeline export --int8` converts it (Coral input wrapper), uint8 I/O, batch 1' if not args.model else args.model.name}"
        f" ({size / 1e6:.2f} MB), input quantization scale {quant[0]:.9g}, zero point {quant[1]}",
        f"- interpreter: {backend}, {args.threads} thread(s); Python {platform.python_version()}, {platform.machine()}",
        "- `lscpu | head`:",
        "",
        "```",
        lscpu_head(),
        "```",
        "",
        f"- {args.rounds} interleaved rounds x {args.per_round} iterations per loop ({len(edge_t)} timed iterations each)",
        "",
        "| loop | per-image median (ms) | p90 (ms) |",
        "|---|---|---|",
        f"| edge: set_input + invoke + get_scores | {edge_ms:.3f} | {np.percentile(edge_t, 90) * 1000:.3f} |",
        f"| bare: set_tensor + invoke + get_tensor | {bare_ms:.3f} | {np.percentile(bare_t, 90) * 1000:.3f} |",
        "",
        f"**ratio edge / bare: {ratio:.3f}** (target <= 1.05)",
        "",
        "The edge loop does more work than the bare one: get_scores dequantizes the scores, and set_input (given no "
        "normalization) resizes when needed and puts the pixels in as the input's own values, as pycoral's set_input does "
        f"(input scale {quant[0]:.9g}, zero point {quant[1]}: the bytes are the model's normalized input).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
    return 0 if ratio <= 1.05 else 1


if __name__ == "__main__":
    sys.exit(main())
