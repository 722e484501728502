"""Fit the Edge TPU cost model on public measurements and judge it on the ones each fit did not see (leave-one-out).

    .venv/bin/python bench/edgetpu_cost/build.py                    (once: the int8 files, in /work/cache-cost)
    .venv/bin/python bench/edgetpu_cost/fit.py [--cache DIR] [--write]

Memory: the compiled parameter layout (layout.py's padding multiples and per-channel bytes) is chosen on Google's own
compiled twins in ../shared/reference/coral (their DarwiNN packages say exactly how many parameter bytes are cached
and streamed, compiled_layout.py), leave-one-out, and checked against public compiler logs of models rebuilt here.
Latency: for each device of Coral's table, non-negative least squares over a few candidate feature sets; each
candidate is judged by leave-one-architecture-out error and the best is kept. --write writes
pipeline/edgetpu/cost/coefficients.json and bench/results/edgetpu_cost.md.
"""
from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List

import numpy as np
from scipy.optimize import nnls

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from compiled_layout import split as compiled_split  # noqa: E402

from edge.model.tflite_file import read_model  # noqa: E402
from pipeline.edgetpu import preflight  # noqa: E402
from pipeline.edgetpu.cost import predict  # noqa: E402
from pipeline.edgetpu.cost.features import model_cost  # noqa: E402
from pipeline.edgetpu.cost.layout import Layout, split  # noqa: E402

VERSION = "1"
MIB = 2 ** 20
REFERENCE = REPO.parent / "shared" / "reference" / "coral"
COEFFICIENTS = REPO / "pipeline" / "edgetpu" / "cost" / "coefficients.json"
RESULTS = REPO / "bench" / "results" / "edgetpu_cost.md"

CORAL_SOURCE = ("Coral, \"Edge TPU performance benchmarks\" (coral.ai/docs/edgetpu/benchmarks), table 1: time per inference, "
                "C++ benchmark, invoke only, ImageNet models (copied in ../shared/DESIGN.md, Round 6 facts)")
# ms: desktop CPU, desktop CPU + USB Accelerator (USB 3.0), embedded CPU (Dev Board's), Dev Board with Edge TPU.
CORAL = {
    "unet_mobilenet_v2_128": ("Unet Mv2 (128x128)", 27.7, 3.3, 190.7, 5.7),
    "densenet121_224": ("DenseNet (224x224)", 380, 20, 1032, 25),
    "inception_v1_224": ("Inception v1 (224x224)", 90, 3.4, 392, 4.1),
    "inception_resnet_v2_299": ("Inception-ResNet V2 (299x299)", 753, 57, 2852, 69),
    "mobilenet_v1_224": ("MobileNet v1 (224x224)", 53, 2.4, 164, 2.4),
    "mobilenet_v2_224": ("MobileNet v2 (224x224)", 51, 2.6, 122, 2.6),
    "resnet50_v1_299": ("ResNet-50 V1 (299x299)", 484, 49, 1763, 56),
    "resnet50_v2_299": ("ResNet-50 V2 (299x299)", 557, 50, 1875, 59),
    "resnet152_v2_299": ("ResNet-152 V2 (299x299)", 1823, 128, 5499, 151),
    "squeezenet_224": ("SqueezeNet (224x224)", 55, 2.1, 232, 2.0),
    "vgg16_224": ("VGG16 (224x224)", 867, 296, 4595, 343),
    "vgg19_224": ("VGG19 (224x224)", 1060, 308, 5538, 357),
}
NOT_REBUILT = {
    "DeepLab V3 (513x513)": "which depth multiplier and output stride the row used is not said; its Dev Board time (241 ms "
                            "vs 52 on USB) is mostly ops on the CPU that the row does not name",
    "Inception v4 (299x299)": "not in Keras; not rebuilt in this round",
    "MobileNet v1 SSD / v2 SSD (224x224)": "a detector with TFLite_Detection_PostProcess and anchors the row does not give",
    "EfficientNet-EdgeTpu S/M/L": "not in Keras (a TPU-searched family with its own blocks)",
}
DEVICES = {"usb3": ("USB Accelerator (USB 3.0)", 2, 1), "devboard": ("Dev Board (Edge TPU on PCIe)", 4, 3)}
# The fastest the host can stream parameters: USB 3.0 signals at 5 Gbit/s, PCIe Gen2 x1 (the Dev Board's link to its
# Edge TPU) at 5 GT/s; both use 8b/10b coding, so at most 500 MB/s of data reach the chip. A row whose predicted
# streamed bytes would need more within its published time cannot be the model rebuilt here (its parameters, or the
# compiler's caching of them, must differ): it is not fitted on, and its error is still reported.
LINK_BYTES_PER_S = {"usb3": 500e6, "devboard": 500e6}

# Public compiler logs of models rebuilt here: (architecture, cached bytes, streamed bytes, source).
PUBLIC_LOGS = [
    ("dense_256", 66.00 * 1024, 0, "a public write-up of Dense(N, N) layers compiled by compiler 16 (section 'Matrix Size "
     "Limits & Weight Caching vs. Streaming'): 256x256 without bias, 66.00KiB cached, 0.00B streamed"),
    ("dense_8192", 0, 64.00 * MIB, "the same write-up: 8192x8192, 0.00B cached, 64.00MiB streamed"),
]
REFERENCE_PAIRS = ["mobilenet_v1_0.25_128_quant", "mobilenet_edgetpu_0.75_224_post_training_quant",
                   "posenet_mobilenet_v1_075_353_481_quant_decoder", "deeplabv3_mnv2_dm05_pascal_quant"]
# On-chip capacity for parameters: "used" + "remaining" in compiler 16 logs of models whose activations are small
# (the same two Dense logs: 66.00KiB + 7.67MiB, 0.00B + 7.88MiB). Logs of models with large activations show less
# (EfficientDet-Lite at 320: 4.21 + 3.29 MiB; a MobileNetV3Small variant: 604.50KiB + 511.50KiB), not modelled.
CAPACITY = int(round((66.00 * 1024 + 7.67 * MIB + 7.88 * MIB) / 2))

# Candidate models of the Edge TPU's time (features of predict.edgetpu_features, each with an intercept), few and each
# with a reason, so that choosing among them by leave-one-out does not fit the noise of a dozen rows:
# - work and streaming added: GMAC and streamed MiB;
# - work and streaming overlapped op by op (bound_gmacs@R: max(GMAC, R x streamed MiB) summed over the ops);
# - either, plus depthwise work (a poor fit for the multiply array) and the count of whole-tensor ops;
# - either, plus the bytes of activations too large to stay on the chip beside the cached parameters (above T MiB).
RATIOS = (0.25, 0.5, 1.0, 2.0)
THRESHOLDS = (0.25, 0.5, 1.0)
FEATURE_SETS = ([("intercept", "gmacs", "streamed_mib"), ("intercept", "gmacs", "depthwise_gmacs", "streamed_mib", "elementwise_ops")]
                + [("intercept", f"bound_gmacs@{r:g}") for r in RATIOS]
                + [("intercept", f"bound_gmacs@{r:g}", "depthwise_gmacs", "elementwise_ops") for r in RATIOS]
                + [("intercept", "gmacs", "streamed_mib", f"large_activation_mib@{t:g}") for t in THRESHOLDS]
                + [("intercept", f"bound_gmacs@{r:g}", f"large_activation_mib@{t:g}") for r in RATIOS for t in THRESHOLDS])
CPU_FEATURES = ("gmacs", "activation_mib", "ops")
DECODE = {"ms_per_1000_boxes": round(0.49 / 2.1, 4), "box_channels": 64,
          "source": "bench/results/yolo_decode.md: edge/answers/heads/yolo.py's typical frame, 2,100 anchor points at 320x320, "
                    "0.49 ms on one x86-64 thread (loaded machine); scaled by the number of boxes"}


def reference_memory(layouts: List[Layout]) -> Dict:
    """Compiled parameter bytes of each reference pair, predicted by each layout, against its DarwiNN package."""
    out = {}
    for stem in REFERENCE_PAIRS:
        info = read_model(REFERENCE / f"{stem}.tflite")
        truth = compiled_split(REFERENCE / f"{stem}_edgetpu.tflite")
        rows = preflight.analyze(REFERENCE / f"{stem}.tflite").rows
        preds = []
        for lay in layouts:
            cost = model_cost(info, rows, lay.op_bytes)
            preds.append(split(cost, lay.capacity_bytes))
        out[stem] = (truth, preds)
    return out


def choose_layout():
    """The padding multiples and per-channel bytes with the smallest worst error, leave-one-out over the reference pairs."""
    grid = [Layout(o, i, c, CAPACITY) for o, i, c in itertools.product((8, 16, 32, 64), (4, 8, 16, 32, 64), (4, 8, 12, 16))]
    memory = reference_memory(grid)
    stems = list(memory)

    def errors(k, among):
        return [(memory[s][1][k].cached_bytes + memory[s][1][k].streamed_bytes) /
                (memory[s][0]["cached"] + memory[s][0]["streamed"]) - 1 for s in among]

    def best(among):
        return min(range(len(grid)), key=lambda k: max(abs(e) for e in errors(k, among)))
    loo = {}
    for s in stems:
        k = best([t for t in stems if t != s])
        loo[s] = (grid[k], errors(k, [s])[0])
    k = best(stems)
    return grid[k], {s: errors(k, [s])[0] for s in stems}, loo, memory, grid


def model_features(path: Path, layout: Layout, whole: bool = True):
    """Features of a converted architecture. `whole`: every op counted on the Edge TPU, as in Coral's compiled models;
    the pre-flight may refuse an op only for the version TF 2.21 writes it in (TRANSPOSE_CONV v4 in the U-Net)."""
    info = read_model(path)
    pre = preflight.analyze(path)
    rows = [r._replace(on_edgetpu=True) if whole and not r.tail else r for r in pre.rows]
    cost = model_cost(info, rows, layout.op_bytes)
    memory = split(cost, layout.capacity_bytes)
    return info, pre, cost, memory, predict.edgetpu_features(cost, memory, RATIOS, THRESHOLDS)


def preflight_seconds(path: Path, repeat: int = 3) -> float:
    """Median seconds to read the file, run the pre-flight and the cost model, as `pipeline compile` does."""
    from pipeline.edgetpu import cost as cost_model
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        data = path.read_bytes()
        info = read_model(data)
        cost_model.for_model(info, preflight.analyze(data, info=info))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


CLI_TIMED = "resnet50_v1_299"  # 25.0 MiB: the size issue 53 asks the pre-flight's time for


def cli_seconds(name: str, cache: Path = Path("/work/cache-cost")) -> float:
    import subprocess
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline", "compile", str(cache / f"{name}.tflite"), "--check-only"],
                   check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - start


def fit_nnls(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares on relative error (each row divided by its target): a 2 ms model counts as much as a
    300 ms one."""
    w = 1.0 / y
    coef, _ = nnls(X * w[:, None], y * w)
    return coef


def loo(X, y):
    preds = []
    for i in range(len(y)):
        keep = [j for j in range(len(y)) if j != i]
        coef = fit_nnls(X[keep], y[keep])
        preds.append(float(X[i] @ coef))
    return np.array(preds)


def score(pred, y) -> float:
    """What a feature set is chosen by: mean relative error plus a quarter of the worst (the goal bounds both)."""
    err = np.abs(pred / y - 1)
    return float(err.mean() + err.max() / 4)


def feature_sets():
    return FEATURE_SETS


def choose(table: Dict[str, Dict[str, float]], names: List[str], y: np.ndarray):
    """The feature set with the best leave-one-out score on `names`."""
    best = None
    for fs in feature_sets():
        X = np.array([[table[n][k] for k in fs] for n in names])
        s = score(loo(X, y), y)
        if best is None or s < best[0]:
            best = (s, fs)
    return best[1]


def nested_loo(table, names, y):
    """Each architecture predicted by a model whose features and coefficients were both chosen without it."""
    preds, chosen = [], []
    for i, held in enumerate(names):
        keep = [j for j in range(len(names)) if j != i]
        fs = choose(table, [names[j] for j in keep], y[keep])
        X = np.array([[table[n][k] for k in fs] for n in names])
        coef = fit_nnls(X[keep], y[keep])
        preds.append(float(X[i] @ coef))
        chosen.append(fs)
    return np.array(preds), chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/work/cache-cost"))
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    layout, in_sample, layout_loo, memory, grid = choose_layout()
    names = [n for n in CORAL if (args.cache / f"{n}.tflite").exists()]
    missing = [n for n in CORAL if n not in names]
    feats, facts = {}, {}
    for n in names + [name for name, *_ in PUBLIC_LOGS]:
        path = args.cache / f"{n}.tflite"
        if not path.exists():
            continue
        info, pre, cost, mem, f = model_features(path, layout)
        facts[n] = {"seconds": preflight_seconds(path), "ops": len(info.ops), "on_edgetpu": pre.ops_on_edgetpu, "cpu_ops": pre.ops_on_cpu,
                    "fatal": pre.fatal, "params_raw": sum(t.buffer_size for t in info.tensors if t.is_constant),
                    "cached": mem.cached_bytes, "streamed": mem.streamed_bytes,
                    "cpu_gmacs": sum(o.macs + o.depthwise_macs for o in cost.ops) / 1e9,
                    "cpu_act": sum(o.activation_bytes for o in cost.ops) / MIB, "n_ops": len(cost.ops),
                    "file_mib": path.stat().st_size / MIB}
        feats[n] = f
    devices = {}
    report = {}
    for key, (label, col, cpu_col) in DEVICES.items():
        y_all = np.array([CORAL[n][col] for n in names], dtype=float)
        fitted = [n for n in names if facts[n]["streamed"] / (CORAL[n][col] / 1e3) <= LINK_BYTES_PER_S[key]]
        excluded = [n for n in names if n not in fitted]
        y = np.array([CORAL[n][col] for n in fitted], dtype=float)
        fs = choose(feats, fitted, y)
        X = np.array([[feats[n][k] for k in fs] for n in fitted])
        coef = fit_nnls(X, y)
        p, chosen = nested_loo(feats, fitted, y)
        err = np.abs(p / y - 1)
        med, worst = float(np.median(err)), float(err.max())
        simple = loo(X, y)
        for n in excluded:  # predicted by the final model, which never saw them
            fitted.append(n)
            p = np.append(p, float(np.array([feats[n][k] for k in fs]) @ coef))
            simple = np.append(simple, p[-1])
            chosen.append(fs)
        y = np.array([CORAL[n][col] for n in fitted], dtype=float)
        # CPU: Coral's full-model CPU times, every op on the CPU, the same features summed over all ops.
        ycpu = np.array([CORAL[n][cpu_col] for n in names], dtype=float) if cpu_col else None
        Xcpu = np.array([[facts[n]["cpu_gmacs"], facts[n]["cpu_act"], facts[n]["n_ops"]] for n in names])
        cpu_coef = fit_nnls(Xcpu, ycpu) if ycpu is not None else None
        cpu_pred = loo(Xcpu, ycpu) if ycpu is not None else None
        devices[key] = {"label": label, "fitted_ms": [float(y.min()), float(y.max())],
                        "edgetpu": {k: round(float(c), 6) for k, c in zip(fs, coef)},
                        "cpu": {k: round(float(c), 6) for k, c in zip(CPU_FEATURES, cpu_coef)} if cpu_coef is not None else None,
                        "cpu_label": "the Dev Board's CPU (Coral's 'Embedded CPU' column)" if cpu_col == 3 else
                                     "the desktop CPU of Coral's table (its 'Desktop CPU' column)"}
        report[key] = {"label": label, "y": y, "loo": p, "median": med, "worst": worst, "features": fs, "chosen": chosen,
                       "names": fitted, "excluded": excluded,
                       "simple": simple, "cpu_y": ycpu, "cpu_loo": cpu_pred}
    data = {"version": f"{VERSION} ({datetime.now(timezone.utc):%Y-%m-%d})", "fitted_by": "bench/edgetpu_cost/fit.py",
            "results": "bench/results/edgetpu_cost.md", "sources": [CORAL_SOURCE] + [s for *_, s in PUBLIC_LOGS] +
            ["Google's compiled twins in ../shared/reference/coral (parameter bytes of their DarwiNN executables)"],
            "layout": {"out_multiple": layout.out_multiple, "in_multiple": layout.in_multiple,
                       "per_channel_bytes": layout.per_channel_bytes, "capacity_bytes": layout.capacity_bytes},
            "devices": devices, "host_decode": DECODE,
            "not_predicted": {"usb2": "no public time per inference on USB 2.0 was found to fit or check it against",
                              "pcie_other_hosts": "the Dev Board row is the only public PCIe figure; an M.2/PCIe card on "
                                                  "another host is given the Dev Board's Edge TPU time"}}
    text = results_markdown(names, missing, feats, facts, report, layout, in_sample, layout_loo, memory, data)
    print(text)
    if args.write:
        COEFFICIENTS.write_text(json.dumps(data, indent=1) + "\n")
        RESULTS.write_text(text)


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def results_markdown(names, missing, feats, facts, report, layout, in_sample, layout_loo, memory, data) -> str:
    L = ["# Edge TPU cost model: fitted on public measurements, judged leave-one-out", "",
         "Command (from the worktree, after `bench/edgetpu_cost/build.py` filled the cache):", "",
         "    .venv/bin/python bench/edgetpu_cost/fit.py --write", "",
         f"Machine: {platform.machine()}, {platform.python_version()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. "
         "Writes pipeline/edgetpu/cost/coefficients.json (the model's numbers, version "
         f"{data['version']}) and this file.", "",
         "## What was used", "",
         f"- Times: {CORAL_SOURCE}. Columns used: USB Accelerator (USB 3.0), Dev Board with Edge TPU, and the two CPU "
         "columns (desktop, the Dev Board's embedded CPU) for ops left on the CPU.",
         "- Architectures rebuilt with random weights (latency does not depend on weight values): tf_keras.applications "
         "(weights=None) for MobileNet v1/v2, DenseNet121, ResNet-50 V1 and V2, ResNet-152 V2, Inception-ResNet V2, "
         "VGG16/19; Inception v1 is not in Keras and is built from the GoogLeNet paper's table as TF-slim builds it; "
         "SqueezeNet 1.0 from its paper; U-Net MobileNetV2 128 as TensorFlow's segmentation tutorial builds it "
         "(bench/edgetpu_cost/architectures.py). Each converted by TF 2.21 to full-integer int8 (uint8 I/O, batch 1) "
         "with 4 random calibration images (bench/edgetpu_cost/build.py).",
         "- Memory: Google's compiled twins in ../shared/reference/coral (the parameter bytes of their DarwiNN "
         "PARAMETER_CACHING and EXECUTION_ONLY executables, read by bench/edgetpu_cost/compiled_layout.py) and public "
         "compiler-16 logs of Dense(N, N) layers rebuilt here.",
         f"- Host decoding for detectors: {DECODE['source']}.", "",
         "Rows of Coral's table not used, and why:", ""]
    L += [f"- {k}: {v}" for k, v in NOT_REBUILT.items()]
    if missing:
        L += [f"- not converted in this run (cache missing): {', '.join(missing)}"]
    L += ["", "## Memory: compiled parameter layout", "",
          f"Chosen layout (smallest worst error over the 4 reference pairs): output channels padded to "
          f"{layout.out_multiple}, input channels to {layout.in_multiple} per kernel tap, {layout.per_channel_bytes} bytes "
          f"per output channel; on-chip capacity {layout.capacity_bytes / MIB:.2f} MiB.", "",
          "| model | compiled parameters (DarwiNN package) | predicted, in-sample | error | leave-one-out layout | LOO error |",
          "|---|---|---|---|---|---|"]
    for stem, (truth, preds) in memory.items():
        total = truth["cached"] + truth["streamed"]
        lay, err = layout_loo[stem]
        L.append(f"| {stem} | {total / MIB:.3f} MiB (cached {truth['cached'] / MIB:.3f}, streamed {truth['streamed'] / MIB:.3f}) "
                 f"| {total * (1 + in_sample[stem]) / MIB:.3f} MiB | {_pct(in_sample[stem])} | {lay.out_multiple}/{lay.in_multiple}/"
                 f"{lay.per_channel_bytes} | {_pct(err)} |")
    L += ["", "Public compiler logs of models rebuilt here (layout and cache rule as above):", "",
          "| model | log: cached / streamed | predicted cached / streamed | error | source |", "|---|---|---|---|---|"]
    for name, cached, streamed, source in PUBLIC_LOGS:
        if name not in facts:
            L.append(f"| {name} | | not converted | | {source} |")
            continue
        f = facts[name]
        err_total = (f["cached"] + f["streamed"]) / (cached + streamed) - 1
        L.append(f"| {name} | {cached / 1024:.2f} KiB / {streamed / 1024:.2f} KiB | {f['cached'] / 1024:.2f} KiB / "
                 f"{f['streamed'] / 1024:.2f} KiB | {_pct(err_total)} | {source} |")
    L += ["", "Public logs read but not used to check the memory (their models cannot be rebuilt here: custom training, "
          "no architecture given), for the capacity only: EfficientDet-Lite (JinRhim's Coral guide, compiler 16: 4.21 MiB "
          "used + 3.29 remaining; another at 4.49 + 3.01); YOLOv8n full-integer (ultralytics/ultralytics #4754: 5.81 + "
          "1.28, 18.19 KiB streamed); yolov7-tiny (WongKinYiu/yolov7 PR #1672: 5.90 + 1.16, 41.75 KiB streamed); a "
          "MobileNetV3Small variant (google-coral/edgetpu #572: 604.50 KiB + 511.50 KiB, 3.45 MiB streamed); #427, #518, "
          "#60 (compilers 2.1 to 15: 1.92, 7.16, 6.86 MiB used with a few KiB left). Used + remaining falls from about 7.8 "
          "MiB as activations grow, by a rule these logs do not pin down; the cost model keeps 7.81 MiB.", ""]
    for key, r in report.items():
        L += ["", f"## Latency: {r['label']}", "",
              f"Features (the best leave-one-out score among the {len(FEATURE_SETS)} candidate models of fit.py's "
              f"FEATURE_SETS): {', '.join(r['features'])}; coefficients, fitted on "
              f"every row (ms per unit; non-negative least squares on relative error): {data['devices'][key]['edgetpu']}.", "",
              f"**Nested leave-one-out: median error {100 * r['median']:.1f}%, worst {100 * r['worst']:.1f}%** over "
              f"{len(r['names']) - len(r['excluded'])} architectures: each row is predicted by a model whose feature set and "
              "coefficients were both chosen without it. (With the feature set above fixed and only the coefficients "
              f"refitted: median {100 * np.median(np.abs(r['simple'] / r['y'] - 1)[:len(r['names']) - len(r['excluded'])]):.1f}%, "
              f"worst {100 * np.abs(r['simple'] / r['y'] - 1)[:len(r['names']) - len(r['excluded'])].max():.1f}%.)", "",
              "Goal (issue 53: median within 15%, none over 40%, on architectures the fit did not see): "
              + ("**met**." if r["median"] <= 0.15 and r["worst"] <= 0.40 else "**not met**: " + ", ".join(
                  f"{n} {_pct(p / y - 1)}" for n, y, p in zip(r["names"], r["y"], r["loo"])
                  if n not in r["excluded"] and abs(p / y - 1) > 0.40) + (" over 40%" if r["worst"] > 0.40 else "")
                 + ("" if r["median"] <= 0.15 else f"; median {100 * r['median']:.1f}%") + "."), "",
              ("Not fitted on (the streamed parameters predicted for the rebuilt model would need more than the link's "
               f"500 MB/s within the published time; predicted by the final model, which did not see them): "
               f"{', '.join(r['excluded'])}." if r["excluded"] else "Every row was fitted on."), "",
              "| architecture | Coral's row | published ms | predicted ms (nested LOO) | error | features chosen without it | GMAC | streamed MiB | cached MiB |",
              "|---|---|---|---|---|---|---|---|---|"]
        for n, y, p, fs in zip(r["names"], r["y"], r["loo"], r["chosen"]):
            L.append(f"| {n} | {CORAL[n][0]} | {y:g} | {p:.1f} | {_pct(p / y - 1)} | {', '.join(fs[1:])} | "
                     f"{feats[n]['gmacs'] + feats[n]['depthwise_gmacs']:.2f} | {facts[n]['streamed'] / MIB:.1f} | "
                     f"{facts[n]['cached'] / MIB:.2f} |")
        if r["cpu_y"] is not None:
            err = np.abs(r["cpu_loo"] / r["cpu_y"] - 1)
            L += ["", f"CPU side ({data['devices'][key]['cpu_label']}), every op on the CPU, leave-one-out: median error "
                  f"{100 * np.median(err):.1f}%, worst {100 * err.max():.1f}%; coefficients {data['devices'][key]['cpu']}."]
    L += ["", "## Not predicted", "", "- USB 2.0: " + data["not_predicted"]["usb2"] + ".",
          "- An M.2 or PCIe card on another host: " + data["not_predicted"]["pcie_other_hosts"] + ".",
          "- The on-chip capacity when activations are large: public logs show it shrinking (EfficientDet-Lite at 320: "
          "7.50 MiB; a MobileNetV3Small variant: 1.09 MiB), by a rule not found; the model assumes "
          f"{data['layout']['capacity_bytes'] / MIB:.2f} MiB.", "",
          "## Pre-flight time", "",
          "Seconds to read each file, run the pre-flight and the cost model, as `pipeline compile` runs them before every "
          "compile (median of 3, one process, this machine, under the load other jobs put on its 2 cores):", ""]
    L += [f"- {n}: {f['seconds']:.2f} s ({f['ops']} ops, file {f['file_mib']:.1f} MiB)" for n, f in facts.items()]
    if CLI_TIMED in facts:
        L += ["", f"The whole command on the 25 MB file, `pipeline compile {CLI_TIMED}.tflite --check-only` in a new process "
              f"(Python start and imports included): {cli_seconds(CLI_TIMED):.2f} s wall."]
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    main()
