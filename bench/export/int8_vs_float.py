"""Benchmark of the export stage: int8 vs float32 size and CPU latency, and the time of `pipeline export --int8`.

    /work/venv/bin/python bench/export/int8_vs_float.py > bench/results/export.md

1. MobileNetV2 1.0 at 224 from models.build (random weights, nothing downloaded), converted at batch 1
   by the export stage's own steps (bench/export/as_exported.py: the int8 model with Coral's input wrapper,
   scale 1/128 and zero point 128, as `pipeline export --int8` writes it): int8 bytes must be <= 0.32x float bytes and the
   ai_edge_litert latency (1 thread, median, float and int8 interleaved in the same loop) <= 0.55x.
2. Wall time of `pipeline export RUN --int8` as a subprocess (TensorFlow import included) on the
   default model, small_cnn on digits, trained for 1 epoch first (training is not timed): target < 30 s.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import contextlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.edge.machine import lscpu_head, source_commit  # noqa: E402

SIZE_TARGET = 0.32
LATENCY_TARGET = 0.55
EXPORT_TIME_TARGET = 30.0
ROUNDS = 200  # latency samples per model
CALIBRATION = 100  # random-pixel calibration images for the random-weight MobileNetV2


def mobilenet_models():
    """(float32 bytes, int8 bytes) of MobileNetV2 as `pipeline export` and `pipeline export --int8` write them."""
    import models
    from bench.export.as_exported import float_as_exported, int8_as_exported

    model = models.build("mobilenet_v2", 10, 224)
    images = np.random.default_rng(0).integers(0, 256, (CALIBRATION, 224, 224, 3), dtype=np.uint8)
    return float_as_exported(model, 224), int8_as_exported(model, 224, images)


def interleaved_latency(float_bytes: bytes, int8_bytes: bytes):
    from ai_edge_litert.interpreter import Interpreter

    runners = {}
    for name, data in (("float32", float_bytes), ("int8", int8_bytes)):
        interpreter = Interpreter(model_content=data, num_threads=1)
        interpreter.allocate_tensors()
        detail = interpreter.get_input_details()[0]
        image = np.random.default_rng(1).integers(0, 256, detail["shape"]).astype(detail["dtype"])
        interpreter.set_tensor(detail["index"], image)
        for _ in range(10):  # warm-up
            interpreter.invoke()
        runners[name] = interpreter
    times = {name: [] for name in runners}
    for _ in range(ROUNDS):
        for name, interpreter in runners.items():
            start = time.perf_counter()
            interpreter.invoke()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) * 1000 for name, t in times.items()}


def export_time():
    from pipeline.train import TrainConfig, train_model as train

    with tempfile.TemporaryDirectory() as tmp:
        with contextlib.redirect_stdout(sys.stderr):  # training's progress lines are not part of the results
            run_dir = train(TrainConfig(data="digits", epochs=1, model="small_cnn"), Path(tmp) / "run")
        pipeline = shutil.which("pipeline", path=str(Path(sys.executable).parent)) or "pipeline"
        start = time.perf_counter()
        done = subprocess.run([pipeline, "export", str(run_dir), "--int8"], check=True, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        return seconds, done.stdout.strip()


def cpu_int8_features() -> str:
    """Which int8 dot-product extensions the CPU has: int8 kernels gain most from them."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return "unknown"
    found = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "asimddp") if f in flags]
    return ", ".join(found) or "none of avx2/avx512/vnni/dotprod"


def input_quantization(data: bytes) -> str:
    from ai_edge_litert.interpreter import Interpreter

    detail = Interpreter(model_content=data).get_input_details()[0]
    scale, zero_point = detail["quantization"]
    return f"{np.dtype(detail['dtype']).name}, {scale:.9g}, {zero_point}"


def main():
    float_bytes, int8_bytes = mobilenet_models()
    latency = interleaved_latency(float_bytes, int8_bytes)
    size_ratio = len(int8_bytes) / len(float_bytes)
    latency_ratio = latency["int8"] / latency["float32"]
    seconds, report = export_time()

    def verdict(ok):
        return "pass" if ok else "FAIL"

    print("# Export benchmark\n")
    print(f"Command: `{Path(sys.executable)} bench/export/int8_vs_float.py > bench/results/export.md`  ")
    print(f"Date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}, at commit {source_commit()}  ")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} CPU(s), CPU features: {cpu_int8_features()}, Python {platform.python_version()}\n")
    print("```\n" + lscpu_head() + "\n```\n")
    print("## MobileNetV2 1.0, 224x224, random weights, batch 1 (ai_edge_litert, 1 thread)\n")
    print("| | float32 | int8 | ratio | target | |")
    print("|---|---|---|---|---|---|")
    print(f"| bytes | {len(float_bytes):,} | {len(int8_bytes):,} | {size_ratio:.3f} | <= {SIZE_TARGET} | {verdict(size_ratio <= SIZE_TARGET)} |")
    print(f"| input (dtype, scale, zero point) | {input_quantization(float_bytes)} | {input_quantization(int8_bytes)} | | | |")
    print(
        f"| median latency (ms, {ROUNDS} interleaved runs) | {latency['float32']:.2f} | {latency['int8']:.2f} | "
        f"{latency_ratio:.3f} | <= {LATENCY_TARGET} | {verdict(latency_ratio <= LATENCY_TARGET)} |"
    )
    print("\n## `pipeline export RUN --int8`, small_cnn on digits (32x32), subprocess wall time\n")
    print(f"{seconds:.1f} s (target < {EXPORT_TIME_TARGET:.0f} s): {verdict(seconds < EXPORT_TIME_TARGET)}\n")
    print("```\n" + report + "\n```")


if __name__ == "__main__":
    main()
