"""Device speed: per-invoke ms of every installed interpreter, and end-to-end images/s against the bare invoke rate.

    # 1. once, with the host venv: the int8 MobileNetV2 224 (uint8 I/O) and 640x480 JPEGs cut from real photos
    .venv/bin/python bench/edge/speed.py make --out /tmp/edge_speed
    # 2. in the device env (.ci/edge-env --make .venv39): the measurement, written to bench/results/edge_speed.md
    .venv39/bin/python bench/edge/speed.py run --dir /tmp/edge_speed

`run` imports no TensorFlow. Per interpreter: the model loaded at 1 thread, invokes timed in
interleaved rounds (so drift in machine load hits each alike). End to end: the interpreter the
device side picks by default (edge.model.interpreter.choose_backend) runs what `edge bench --images`
runs (edge.answers.timing.end_to_end_rate over edge.answers.runner.Runner's score loop: decode and resize ahead on a
worker thread, set_input, invoke, get_scores), in rounds interleaved with bare invokes on the same
interpreter. The command itself (`edge evaluate`, process and all) is timed by bench/edge/command.py. Also the JPEG decode
and resize alone, full size vs the pixel contract's reduced scale, and their mean absolute difference.
Targets: default invoke <= 1.2x the fastest installed; end to end >= 0.75 of the bare invoke rate.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.edge.machine import cpu_info, lscpu_block, source_commit  # noqa: E402
RESULTS = ROOT / "bench" / "results" / "edge_speed.md"
MODEL = "mobilenet_v2_int8.tflite"
CONTRACT = "contract.json"  # the pixel contract `pipeline export --int8` records for that model
PHOTOS = "photos"
INVOKE_TARGET, END_TO_END_TARGET = 1.2, 0.75


def make(out: Path, per_class: int = 50) -> None:
    """Host only: the model as `pipeline export --int8` writes it (Coral's input wrapper included), the contract
    the export records for it, and the JPEGs."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from bench.export.int8_vs_float import mobilenet_models
    from edge.pixels.contract import PixelContract
    from pipeline.quant import convention
    from tests.support.helpers import write_camera_jpegs

    out.mkdir(parents=True, exist_ok=True)
    (out / MODEL).write_bytes(mobilenet_models()[1])
    (out / CONTRACT).write_text(json.dumps(convention.contract(PixelContract(), int8=True).as_record()))
    write_camera_jpegs(out / PHOTOS, per_class=per_class, size=(640, 480))
    print(f"wrote {out / MODEL} and {len(list((out / PHOTOS).rglob('*.jpg')))} JPEGs under {out / PHOTOS}")


def exported_contract(folder: Path):
    """The pixel contract `make` recorded beside the model (the export's: mean 128, std 128 for an int8 model)."""
    from edge.pixels.contract import PixelContract

    return PixelContract.from_record(json.loads((folder / CONTRACT).read_text()), str(folder / CONTRACT))


def installed_interpreters():
    from edge.model.interpreter import CPU_ORDER, _import_backend, _probe_backend

    return [(name, _import_backend(name)) for name in CPU_ORDER if _probe_backend(name) is True]


def invoke_times(modules, data: bytes, rounds: int, per_round: int):
    """Per interpreter: median and p90 ms per invoke, interleaved round by round."""
    runners = {}
    for name, module in modules:
        interpreter = module.Interpreter(model_content=data, num_threads=1)
        interpreter.allocate_tensors()
        detail = interpreter.get_input_details()[0]
        interpreter.set_tensor(detail["index"], np.random.default_rng(1).integers(0, 256, detail["shape"]).astype(detail["dtype"]))
        for _ in range(5):
            interpreter.invoke()
        runners[name] = interpreter
    times = {name: [] for name in runners}
    for r in range(rounds):
        for name in (list(runners) if r % 2 == 0 else list(reversed(runners))):
            for _ in range(per_round):
                start = time.perf_counter()
                runners[name].invoke()
                times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(t) * 1000, float(np.percentile(t, 90)) * 1000) for name, t in times.items()}


def end_to_end(model: Path, files, rounds: int):
    """(backend, why, bare invokes/s, images/s): what `edge bench --images` measures, rounds interleaved."""
    from edge.answers.runner import Runner
    from edge.answers.timing import end_to_end_rate

    runner = Runner.with_contract(model, exported_contract(model.parent), edgetpu=False, threads=1)
    loaded, interpreter = runner.loaded, runner.interpreter
    bare, rates, cpu_share = [], [], []
    end_to_end_rate(runner, files[:8])  # warm-up: file cache, first invokes
    for _ in range(rounds):
        for _ in range(len(files)):
            start = time.perf_counter()
            interpreter.invoke()
            bare.append(time.perf_counter() - start)
        cpu, wall = _cpu_seconds(), time.perf_counter()
        rates.append(end_to_end_rate(runner, files))
        # Above 1: decoding and invoking overlapped on two cores; 1.0: this process got one core's worth.
        cpu_share.append((_cpu_seconds() - cpu) / (time.perf_counter() - wall))
    return loaded.backend, loaded.why, 1 / statistics.median(bare), rates, cpu_share


def _cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def decode_costs(files, size=(224, 224)):
    """ms per image for decode + resize at full size and at the contract's scale, and their pixel difference."""
    from edge.pixels.preprocess import load_image, load_pixels

    timings = {True: [], False: []}
    for scaled in (False, True, False, True):
        start = time.perf_counter()
        for f in files:
            load_pixels(f, size, scaled=scaled)
        timings[scaled].append((time.perf_counter() - start) / len(files) * 1000)
    diffs = [np.abs(load_pixels(f, size, scaled=True).astype(np.int64) - load_pixels(f, size, scaled=False)).mean() for f in files]
    decoded = load_image(files[0], size=size).size
    return min(timings[False]), min(timings[True]), float(np.mean(diffs)), float(np.max(diffs)), decoded


def run(folder: Path, rounds: int, write: bool) -> int:
    model = folder / MODEL
    data = model.read_bytes()
    files = sorted((folder / PHOTOS).rglob("*.jpg"))
    modules = installed_interpreters()
    invokes = invoke_times(modules, data, rounds, 20)
    fastest = min(ms for ms, _ in invokes.values())
    load_before = os.getloadavg()
    backend, why, bare_rate, round_rates, round_shares = end_to_end(model, files, max(3, rounds // 5))
    rate, cpu_share = statistics.median(round_rates), statistics.median(round_shares)
    full_ms, scaled_ms, mad, mad_max, decoded = decode_costs(files)
    versions = {name: getattr(sys.modules.get(name.split(".")[0]), "__version__", "?") for name, _ in modules}
    invoke_ratio, e2e_ratio = invokes[backend][0] / fastest, rate / bare_rate
    script = Path(sys.argv[0]).resolve()
    lines = [
        "# Device speed: interpreters and end-to-end images/s",
        "",
        f"- date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}, at commit {source_commit()}",
        f"- command: `{Path(sys.executable).parent.parent.name}/bin/python {script.relative_to(ROOT)} {' '.join(sys.argv[1:])}`"
        f" (model and JPEGs from `bench/edge/speed.py make`)",
        f"- CPU: {cpu_info()}; Python {platform.python_version()}, {platform.machine()}, numpy {np.__version__}",
        f"- model: MobileNetV2 1.0 224 from models.build, int8 as `pipeline export --int8` converts it (bench/export/as_exported.py: "
        f"Coral's input wrapper, uint8 input scale 1/128 zero point 128), batch 1 "
        f"({len(data) / 1e6:.2f} MB, sha256 {hashlib.sha256(data).hexdigest()[:12]}), 1 interpreter thread",
        f"- images: {len(files)} 640x480 JPEGs cut from scikit-learn's two photos (tests/support/helpers.py write_camera_jpegs)",
        f"- machine load (1-minute load average) before the end-to-end rounds: {load_before[0]:.2f}, after the run: "
        f"{os.getloadavg()[0]:.2f}; the 2 cores are shared with other work, so every ratio below comes from one run",
        "",
        *lscpu_block(),
        f"## Per-invoke latency, {rounds} interleaved rounds x 20 invokes each",
        "",
        "| interpreter | version | median ms | p90 ms | x fastest |",
        "|---|---|---|---|---|",
    ]
    for name, (ms, p90) in invokes.items():
        lines.append(f"| {name}{' (default for CPU models)' if name == backend else ''} | {versions[name]} | {ms:.2f} | {p90:.2f} | {ms / fastest:.2f} |")
    lines += [
        "",
        f"Default: **{backend}** ({why}); its invoke is **{invoke_ratio:.2f}x** the fastest installed (target <= {INVOKE_TARGET}).",
        "",
        f"## End to end with {backend}, {max(3, rounds // 5)} rounds, each a pass of bare invokes then a pass over the images",
        "",
        "| path | per second |",
        "|---|---|",
        f"| bare invoke (set once, invoke) | {bare_rate:.1f} invokes/s ({1000 / bare_rate:.2f} ms) |",
        f"| end to end: decode + resize ahead on a worker, set_input, invoke, get_scores | {rate:.1f} images/s ({1000 / rate:.2f} ms) |",
        "",
        f"**end to end / bare: {e2e_ratio:.2f}** (target >= {END_TO_END_TARGET}). Process CPU time / wall time during the "
        f"end-to-end passes: {cpu_share:.2f} (above 1 = decoding overlapped the invokes on the second core).",
        "",
        "Per round (end to end / bare, CPU / wall): " + ", ".join(f"{r / bare_rate:.2f} ({c:.2f})" for r, c in zip(round_rates, round_shares)) + ".",
        "",
        "## Decode and resize to 224x224, one thread, best of two passes",
        "",
        "| decode | ms per image |",
        "|---|---|",
        f"| full size (pixel contract version 1) | {full_ms:.2f} |",
        f"| reduced scale (version 2: decoded at {decoded[0]}x{decoded[1]}) | {scaled_ms:.2f} |",
        "",
        f"Mean absolute difference of the resulting 224x224 pixels, reduced vs full: {mad:.3f} grey levels on average, "
        f"{mad_max:.3f} for the worst image: a different contract (version 2), not noise, which is why training must decode the same way.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if write:
        RESULTS.write_text(text)
    return 0 if invoke_ratio <= INVOKE_TARGET and e2e_ratio >= END_TO_END_TARGET else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    maker = sub.add_parser("make")
    maker.add_argument("--out", type=Path, required=True)
    maker.add_argument("--per-class", type=int, default=50, help="JPEGs per photo (bench/edge/command.py wants 300)")
    runner = sub.add_parser("run")
    runner.add_argument("--dir", type=Path, required=True, help="what `make` wrote")
    runner.add_argument("--rounds", type=int, default=20)
    runner.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.command == "make":
        make(args.out, args.per_class)
        return 0
    return run(args.dir, args.rounds, not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
