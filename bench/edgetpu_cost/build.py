"""Convert each architecture of Coral's table (architectures.py) to a full-integer int8 .tflite with random weights.

    .venv/bin/python bench/edgetpu_cost/build.py [--cache /work/cache-cost] [NAME ...]

Weights are random (weights=None) and calibration is four random images: latency and memory depend on shapes, not
values. uint8 input and output like Coral's models, batch fixed at 1. A file already in the cache is kept (the big
models take minutes each on two cores); each is written under a temporary name and renamed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.edgetpu_cost.architectures import ARCHITECTURES  # noqa: E402

DEFAULT_CACHE = Path("/work/cache-cost")


def convert(name: str, out: Path) -> float:
    import numpy as np
    import tensorflow as tf
    arch = ARCHITECTURES[name]
    model = arch.build()
    shape = [1, arch.size] if arch.vector else [1, arch.size, arch.size, 3]
    spec = tf.TensorSpec(shape, tf.float32)
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn], model)
    rng = np.random.default_rng(0)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([rng.uniform(-1, 1, shape).astype("float32")]
                                                for _ in range(4))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.uint8
    converter.inference_output_type = tf.uint8
    start = time.perf_counter()
    data = converter.convert()
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, out)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="architectures (default: all)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    for name in args.names or list(ARCHITECTURES):
        out = args.cache / f"{name}.tflite"
        if out.exists():
            print(f"{name}: cached {out}", flush=True)
            continue
        seconds = convert(name, out)
        print(f"{name}: {out.stat().st_size / 2**20:.1f} MiB in {seconds:.0f} s", flush=True)


if __name__ == "__main__":
    main()
