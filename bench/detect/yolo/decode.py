"""Host decode + NMS of the anchor-free head's outputs at 320x320 (2,100 anchor points), one thread, and the int8
model's CPU invoke beside it.

    .venv/bin/python bench/detect/yolo/decode.py [--classes 3] [--repeats 300] [--invoke]

Cases, each on int8 outputs as the Edge TPU hands them back:
- typical: a few objects (each seen by a handful of points), every other point at the bounded floor (-4 logit);
- all candidates: every one of the 2,100 points above the score cut (the worst case for the filter, softmax and NMS);
- Frigate's reading (edge/clients/frigate.py) of the typical case, for comparison with its own plugin's cost.
--invoke also builds untrained int8 models at 320 (small_cnn, MobileNetV2 alpha 0.35; TensorFlow needed) and times
ai-edge-litert's invoke on one CPU thread: latency does not depend on the weights.
"""
from __future__ import annotations

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"  # numpy's own threads: one, as a Coral board's host side would be measured

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from edge.clients import frigate as frigate_yolo
from edge.answers.heads import yolo as yolo_decode  # noqa: E402

SIZE = 320


class _Outputs:
    def __init__(self, dist, logits):
        self.t = {0: dist[None], 1: logits[None]}

    def get_output_details(self):
        return [{"index": 0, "shape": np.array(self.t[0].shape), "quantization": (0.1, -20)},
                {"index": 1, "shape": np.array(self.t[1].shape), "quantization": (1 / 32, 0)}]

    def get_input_details(self):
        return [{"index": 0, "shape": np.array([1, SIZE, SIZE, 3])}]

    def get_tensor(self, i):
        return self.t[i]


def outputs(classes: int, everything: bool, rng):
    n = yolo_decode.anchor_points(SIZE, SIZE)[0].shape[0]
    dist = rng.integers(-128, 128, (n, 64)).astype(np.int8)
    logits = np.full((n, classes), -128, np.int8)
    if everything:
        logits[:] = rng.integers(-60, 127, (n, classes)).astype(np.int8)
    else:
        for i in rng.choice(n, 40, replace=False):  # about 8 objects x 5 points
            logits[i, rng.integers(classes)] = rng.integers(20, 127)
    return _Outputs(dist, logits)


def ms(fn, repeats: int) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def invoke_ms(repeats: int) -> dict:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    from ai_edge_litert.interpreter import Interpreter

    from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
    from pipeline.tasks.detect.heads.yolo.export import convert

    found = {}
    rng = np.random.default_rng(0)
    for name, backbone, options in (("small_cnn", "small_cnn", {}), ("mobilenet_v2 alpha 0.35", "mobilenet_v2", {"alpha": 0.35})):
        data = convert(build_yolo_detector(backbone, SIZE, 3, **options), SIZE, ["a", "b", "c"], int8=True,
                       calibration=rng.integers(0, 256, (2, SIZE, SIZE, 3), dtype=np.uint8))
        interpreter = Interpreter(model_content=data, num_threads=1)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], rng.integers(0, 256, (1, SIZE, SIZE, 3), dtype=np.uint8))
        found[name] = ms(interpreter.invoke, max(10, repeats // 10))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--invoke", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}; "
          f"load average {os.getloadavg()[0]:.1f}; {args.classes} classes, 320x320 (2,100 points), median of {args.repeats}")
    typical, everything = outputs(args.classes, False, rng), outputs(args.classes, True, rng)
    layout = yolo_decode.find_layout(typical)
    every_layout = yolo_decode.find_layout(everything)
    frigate = frigate_yolo.FrigateYolo(typical)
    for label, fn in (("decode + NMS, typical (40 points above the cut)", lambda: yolo_decode.read(typical, layout)),
                      ("decode + NMS, all 2,100 points above the cut", lambda: yolo_decode.read(everything, every_layout)),
                      ("Frigate's reading (reproduced), typical", lambda: frigate.read(typical))):
        print(f"{label}: {ms(fn, args.repeats):.3f} ms", flush=True)
    if args.invoke:
        for name, value in invoke_ms(args.repeats).items():
            print(f"int8 invoke on the CPU, 1 thread, {name} at 320: {value:.1f} ms (ai-edge-litert)", flush=True)
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
