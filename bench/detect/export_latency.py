"""Benchmark of the detector's export: int8 vs float32 TFLite latency, both ending in TFLite_Detection_PostProcess.

    .venv/bin/python bench/detect/export_latency.py > bench/results/detect_export.md

For each registry backbone, a detector (random weights, nothing downloaded) is converted by
pipeline.tasks.detect.heads.ssd.postprocess.convert both ways: the float twin and the int8 model with Coral's uint8 input.
Both run on ai_edge_litert with 1 thread on the same input (a shapes image), invocations interleaved in one
loop so the machine's noise falls on both alike; the medians are compared. Target: int8 / float <= 0.6.
The post-processing op (float in both) is inside both invocations.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import io
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

TARGET = 0.6
ROUNDS = 200
CALIBRATION = 64
CASES = (("small_cnn", 128, {}), ("mobilenet_v2", 224, {"alpha": 1.0}))


def _models(backbone: str, size: int, options: dict):
    import tensorflow as tf
    from PIL import Image

    from pipeline.tasks.detect.heads.ssd.model import build_detector
    from pipeline.tasks.detect.heads.ssd.anchors import AnchorSpec
    from pipeline.tasks.detect.heads.ssd.postprocess import Settings, convert
    from pipeline.tasks.detect.data.shapes import CLASSES, shapes

    spec = AnchorSpec()
    tf.keras.utils.set_random_seed(0)
    model = build_detector(backbone, size, len(CLASSES), spec.per_location, **options)
    source = shapes(CALIBRATION + 1, size=size, seed=1)
    images = [np.asarray(Image.open(io.BytesIO(e.image)).convert("RGB")) for e in source.examples]
    start = time.perf_counter()
    float_bytes = convert(model, spec, size, CLASSES, Settings(), int8=False)
    int8_bytes = convert(model, spec, size, CLASSES, Settings(), int8=True, calibration=images[1:])
    seconds = time.perf_counter() - start
    return float_bytes, int8_bytes, images[0], seconds


def _interpreter(data: bytes, pixels: np.ndarray):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=data, num_threads=1)
    interpreter.allocate_tensors()
    detail = interpreter.get_input_details()[0]
    x = pixels[None].astype(detail["dtype"])  # raw pixels: the float twin takes 0..255, the int8 its bytes (scale 1/128, zp 128)
    interpreter.set_tensor(detail["index"], x)
    return interpreter


def interleaved(models: dict, pixels: np.ndarray) -> dict:
    """Median ms per model, invocations interleaved round by round (after a warm-up)."""
    interpreters = {name: _interpreter(data, pixels) for name, data in models.items()}
    times = {name: [] for name in models}
    for it in interpreters.values():
        for _ in range(5):
            it.invoke()
    for _ in range(ROUNDS):
        for name, it in interpreters.items():
            start = time.perf_counter()
            it.invoke()
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    import tensorflow as tf

    print("# Detector export: int8 vs float32 TFLite latency (both ending in TFLite_Detection_PostProcess)\n")
    print("Command (from the worktree, venv from `pip install -e \".[host,test]\"`):\n")
    print("    .venv/bin/python bench/detect/export_latency.py > bench/results/detect_export.md\n")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), Python {platform.python_version()}, "
          f"TensorFlow {tf.__version__}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. ai_edge_litert, 1 thread, "
          f"{ROUNDS} interleaved rounds, medians. Random weights; one shapes image as input.\n")
    print(f"| backbone | input | float ms | int8 ms | int8 / float (target <= {TARGET}) | float MB | int8 MB | convert both, s |")
    print("|---|---|---|---|---|---|---|---|")
    for backbone, size, options in CASES:
        float_bytes, int8_bytes, pixels, seconds = _models(backbone, size, options)
        ms = interleaved({"float": float_bytes, "int8": int8_bytes}, pixels)
        ratio = ms["int8"] / ms["float"]
        print(f"| {backbone} {options or ''} | {size}x{size} | {ms['float']:.3f} | {ms['int8']:.3f} | {ratio:.2f} "
              f"{'met' if ratio <= TARGET else 'NOT met'} | {len(float_bytes) / 1e6:.2f} | {len(int8_bytes) / 1e6:.2f} | {seconds:.1f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
