"""Benchmark of `pipeline import`: the time and peak memory of import + export --int8 for a model edgeflow did not train,
the Edge TPU mapping, and int8 top-1 against the original model run as given.

    .venv/bin/python bench/importing/classifiers.py --torch-python TORCH_VENV/bin/python > bench/results/import.md

1. A classifier trained by a plain Keras 3 script (its own Rescaling and class order; tests/pipeline/importing/test_import.py's script),
   saved as .keras: imported with --labels.
2. A small CNN trained with PyTorch (the CPU wheel, .ci/torch-env) and exported by torch.onnx.export (NCHW, ImageNet
   mean/std; tests/pipeline/importing/test_onnx.py's script): imported with the ImageNet normalization. Target: int8 top-1 within
   1 pp of onnxruntime's on the held-out images, 100% of the ops predicted on the Edge TPU.
Each stage runs as its own process under /usr/bin/time -v (TensorFlow's import included); training is not timed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.support.helpers import quiet_env, write_class_folders  # noqa: E402
from tests.pipeline.importing.test_import import PLAIN_KERAS_SCRIPT  # noqa: E402
from tests.pipeline.importing.test_onnx import IMAGENET, TORCH_SCRIPT  # noqa: E402

PIPELINE = [sys.executable, "-m", "pipeline"]


def timed(args, ok=(0,)) -> dict:
    """Wall seconds and peak resident MB of one `pipeline` process; its stdout. An exit code outside `ok` stops the
    bench (parity's 1 is its gate's verdict, with the report written: callers that report it allow it)."""
    done = subprocess.run(["/usr/bin/time", "-v", *PIPELINE, *map(str, args)], capture_output=True, text=True,
                          env=quiet_env(), cwd=REPO)
    if done.returncode not in ok:
        sys.exit(f"{args[:2]} failed:\n{done.stderr[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", done.stderr).group(1)
    seconds = sum(float(part) * 60 ** i for i, part in enumerate(reversed(wall.split(":"))))
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) / 1024
    return {"seconds": seconds, "peak_mb": peak, "stdout": done.stdout}


def measure(name: str, model: Path, data: Path, options, run: Path) -> dict:
    imported = timed(["import", model, "--data", data, *options, "--out", run])
    exported = timed(["export", run, "--int8"])
    preflight = json.loads(timed(["compile", run, "--check-only", "--json"])["stdout"].strip().splitlines()[-1])
    timed(["parity", run])
    report = json.loads((run / "parity" / "report.json").read_text())
    models = report["models"]
    return {"name": name, "import": imported, "export": exported, "mapped": f"{preflight['ops_on_edgetpu']}/{preflight['total_ops']}",
            "reference": report["reference_model"], "images": models["int8_cpu"]["images"],
            "reference_top1": models["float_savedmodel"]["top1"], "int8_top1": models["int8_cpu"]["top1"],
            "drop_pp": models["int8_cpu"]["drop_pp"], "agreement": models["int8_cpu"]["agreement"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", required=True, help="a Python with torch (.ci/torch-env --make DIR)")
    parser.add_argument("--per-class", type=int, default=100, help="images per class of the shapes folders")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = write_class_folders(tmp / "shapes", per_class=args.per_class)
        for folder in ("keras", "torch"):
            (tmp / folder).mkdir()
        subprocess.run([sys.executable, "-c", PLAIN_KERAS_SCRIPT, str(data), str(tmp / "keras")], check=True, env=quiet_env(),
                       capture_output=True)
        subprocess.run([args.torch_python, "-c", TORCH_SCRIPT, str(data), str(tmp / "torch")], check=True, env=quiet_env(),
                       capture_output=True)
        rows.append(measure("Keras 3 .keras (plain script, own Rescaling and class order)", tmp / "keras" / "model.keras", data,
                            ["--labels", tmp / "keras" / "labels.txt"], tmp / "run-keras"))
        rows.append(measure("PyTorch CNN through torch.onnx.export (NCHW, ImageNet mean/std)", tmp / "torch" / "model.onnx", data,
                            IMAGENET, tmp / "run-onnx"))
    load = os.getloadavg()[0]
    print("# `pipeline import`: time, peak memory, Edge TPU mapping, int8 against the original\n")
    print("Command: `.venv/bin/python bench/importing/classifiers.py --torch-python TORCH_VENV/bin/python`  ")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with other jobs (load average {load:.1f} at the end), "
          f"Python {platform.python_version()}  ")
    print(f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n")
    print(f"Data: `write_class_folders(per_class={args.per_class})` (3 classes of 40x40 PNGs), 32 px models; held-out "
          "split 0.2 by the seeded hash. Each stage is a process (TensorFlow's start included), under /usr/bin/time -v.\n")
    print("| model | import s | import peak MB | export --int8 s | export peak MB | ops on the Edge TPU | held-out | "
          "reference top-1 | int8 top-1 | drop pp | agreement |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['import']['seconds']:.1f} | {r['import']['peak_mb']:.0f} | {r['export']['seconds']:.1f} | "
              f"{r['export']['peak_mb']:.0f} | {r['mapped']} | {r['images']} | {r['reference_top1']:.4f} | {r['int8_top1']:.4f} | "
              f"{r['drop_pp']:.2f} | {r['agreement']:.4f} |")
    print("\nThe reference row is the model as given: " + "; ".join(r["reference"] for r in rows) + ".")


if __name__ == "__main__":
    main()
