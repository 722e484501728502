"""Benchmark of writing TFLite metadata into a model: what `pipeline export` and `pipeline compile` add per model.

    .venv/bin/python bench/export/metadata.py > bench/results/metadata.md

MobileNetV2 1.0 at 224 from models.build (random weights, nothing downloaded) converted to int8 with the export
stage's converter settings (20 random calibration images: the metadata's cost depends on the model's size and
tables, not on its weights). Timed, median of ROUNDS: `metadata.write` with a classifier's description (encode
the flatbuffer, rewrite the model through TensorFlow's TFLite object API, append the zip), `metadata.copy` of that
metadata onto the model without it (what compile does for a compiled model that lost it). TensorFlow's TFLite
object API module is already imported by the converter, as in `pipeline export`. Target: under 1 s per model.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ROUNDS = 7
TARGET_S = 1.0


def mobilenet_int8() -> bytes:
    import models
    from pipeline.export import ExportConfig
    from pipeline.quant.convert import Mode, keras_function, make_converter

    model = models.build("mobilenet_v2", 10, 224)
    concrete, trackable = keras_function(model, 224)
    images = np.random.default_rng(0).integers(0, 256, (20, 224, 224, 3), dtype=np.uint8)
    return make_converter(concrete, trackable, Mode.INT8, ExportConfig(mode=Mode.INT8), images).convert()


def description():
    from pipeline.metadata.description import (AssociatedFile, FeatureContent, FileType, ImageContent, ModelDescription,
                                               Normalization, Stats, Tensor)

    labels = AssociatedFile("labels.txt", "".join(f"class {i}\n" for i in range(10)).encode(), FileType.TENSOR_AXIS_LABELS)
    record = AssociatedFile("edgeflow_model.json", b"{" + b'"x": 1, ' * 500 + b'"y": 2}', FileType.DESCRIPTIONS)
    return ModelDescription(name="mobilenet_v2 int8", description="bench", version="1", author="edgeflow",
                            inputs=(Tensor("image", content=ImageContent(), process_units=(Normalization((128.0,), (128.0,)),),
                                           stats=Stats((255.0,), (0.0,))),),
                            outputs=(Tensor("scores", content=FeatureContent(), files=(labels,)),), files=(record,))


def median_s(fn) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    model = mobilenet_int8()
    from pipeline import metadata

    described = description()
    written = metadata.write(model, described)
    write_s = median_s(lambda: metadata.write(model, described))
    copy_s = median_s(lambda: metadata.copy(written, model, "model"))
    print("# TFLite metadata writer benchmark\n")
    print("Command: `.venv/bin/python bench/export/metadata.py > bench/results/metadata.md`  ")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} CPU(s), Python {sys.version.split()[0]}\n")
    print(f"MobileNetV2 1.0 224 int8: {len(model):,} bytes, {len(written):,} with metadata and packed files\n")
    print(f"| step | seconds (median of {ROUNDS}) | target | |")
    print("|---|---|---|---|")
    for name, seconds in (("metadata.write (encode, rewrite the model, append the zip)", write_s),
                          ("metadata.copy onto the model without it (compile's repair)", copy_s)):
        print(f"| {name} | {seconds:.3f} | < {TARGET_S:g} | {'pass' if seconds < TARGET_S else 'FAIL'} |")


if __name__ == "__main__":
    main()
