"""The int8 quantization report: sizes, op counts by version, and per-layer error against the float model.

Written to RUN/quantization.json by `pipeline export RUN --int8`; `table` is the short version printed.
Per-layer error comes from TensorFlow's QuantizationDebugger, which runs the float and the int8 model
side by side on a few calibration images and compares each quantized layer's output.
"""
from __future__ import annotations

import csv
import io
import math
from typing import Callable, Dict, List

import numpy as np

from pipeline.rundir.run import artifact

WORST_LAYERS = 3  # named in the table; the JSON keeps every layer


def layer_errors(make_converter: Callable, images: np.ndarray) -> List[Dict[str, object]]:
    """Per quantized layer: op, tensor name, rmse, max |error|, scale, and rmse in quantization steps.

    `rmse_steps` (rmse / scale) makes layers comparable: an error of about 0.3 steps is rounding
    alone; several steps means the layer's range is badly covered by the calibration.
    """
    import tensorflow as tf

    def dataset():
        for image in images:
            yield [image[None].astype(np.float32)]

    from pipeline.console import native_quiet

    with native_quiet():  # the converter and TFLite's interpreter print from C++
        debugger = tf.lite.experimental.QuantizationDebugger(converter=make_converter(), debug_dataset=dataset)
        debugger.run()
    dump = io.StringIO()
    debugger.layer_statistics_dump(dump)
    layers = []
    for row in csv.DictReader(io.StringIO(dump.getvalue())):
        rmse = math.sqrt(max(float(row["mean_squared_error"]), 0.0))
        scale = float(row["scale"])
        layers.append(
            {
                "op": row["op_name"],
                "tensor": row["tensor_name"],
                "rmse": rmse,
                "max_abs_error": float(row["max_abs_error"]),
                "scale": scale,
                "zero_point": int(float(row["zero_point"])),
                "rmse_steps": rmse / scale if scale > 0 else float("inf"),
            }
        )
    return layers


def op_counts(info) -> Dict[str, int]:
    """{"CONV_2D v3": 3, ...} from a parsed model (JSON keys, sorted)."""
    from edge.model.tflite_file import op_counts as counts_by_version

    return {f"{name} v{version}": n for (name, version), n in sorted(counts_by_version(info).items())}


def build(info, int8_bytes: int, float_bytes: int, layers: List[Dict[str, object]], debug_images: int, facts: dict, notes: List[str]) -> dict:
    """The JSON report; `facts` is the manifest entry (input/output quantization, calibration, qat)."""
    from pipeline.quant.verify import per_channel_tensors

    worst = sorted(layers, key=lambda layer: -layer["rmse_steps"])[:WORST_LAYERS]
    return {
        "schema_version": artifact("quantization_report").schema,
        "sizes": {"float32_bytes": float_bytes, "int8_bytes": int8_bytes, "ratio": round(int8_bytes / float_bytes, 4)},
        "ops": op_counts(info),
        "per_channel_tensors": len(per_channel_tensors(info)),
        "input": facts.get("input"),
        "output": facts.get("output"),
        "raw_pixels": facts.get("raw_pixels"),
        "calibration": facts.get("calibration"),
        "qat": facts.get("qat"),
        "debug_images": debug_images,  # calibration images the per-layer errors were measured on
        "layers": layers,
        "worst_layers": [layer["tensor"] for layer in worst],
        "notes": list(notes),
    }


def table(report: dict) -> str:
    """A few lines for the terminal."""
    sizes = report["sizes"]
    lines = [
        f"size      float32 {sizes['float32_bytes']:,} B -> int8 {sizes['int8_bytes']:,} B ({sizes['ratio']:.2f}x)",
        f"input     {_q(report['input'])}    output {_q(report['output'])}",
        "ops       " + ", ".join(f"{name} x{n}" for name, n in report["ops"].items()),
        f"weights   {'per tensor' if report['per_channel_tensors'] == 0 else str(report['per_channel_tensors']) + ' tensors per channel'}",
    ]
    calib = report.get("calibration") or {}
    if calib:
        lines.append(f"calib     {calib['samples']} images from {calib['source']}" + (" (class-balanced)" if calib.get("balanced") else ""))
    if report.get("qat"):
        lines.append(f"qat       {report['qat']['epochs']} epoch(s) of quantization-aware fine-tuning")
    by_tensor = {layer["tensor"]: layer for layer in report["layers"]}
    lines.append("worst layers (rmse in quantization steps, rmse, max |error|):")
    for name in report["worst_layers"]:
        layer = by_tensor[name]
        lines.append(f"  {layer['op']:<18} {name[:60]:<60} {layer['rmse_steps']:6.2f}  {layer['rmse']:.4g}  {layer['max_abs_error']:.4g}")
    return "\n".join(lines)


def _q(q: dict) -> str:
    if q is None or q.get("scale") is None:
        return str(q and q.get("dtype"))
    return f"{q['dtype']} scale {q['scale']:.6g} zero point {q['zero_point']}"
