"""`edge evaluate` on a detection bundle as a user runs it, against the bare invoke + output-reading rate.

    # 1. once, with the host venv: a tiny detection run on `shapes` (a few epochs: accuracy is not what is
    #    measured), its int8 export and its bundle; the commands it ran are recorded in DIR/made.json
    .venv/bin/python bench/edge/detect_command.py make --out /tmp/edge_detect --epochs 3 --heldout 600
    # 2. in the device env (.ci/edge-env --make .venv39): the measurement, written to bench/results/edge_detect_command.md
    .venv39/bin/python bench/edge/detect_command.py measure --dir /tmp/edge_detect

The measurement imports no TensorFlow. It opens the bundle's int8 detector as the device does (edge.answers.detect.open_detector,
1 thread) and, round after round, in an order that alternates so drift in machine load hits each alike:
  bare      every bundle image decoded beforehand; per image: set the input, invoke (the model's own
            post-processing op runs inside it), read the four outputs (edge.answers.detect.get_raw). Its rate as
            images / wall time of the pass (what the ratios use) and as 1 / median image (load filtered out)
  in-process  what the command does after its model is open, in this process: list and check the bundle,
            edge.answers.evaluation.evaluate_detections (decoding ahead on a worker), the predictions document written
            (edge.documents.predictions.write_detections)
  command   `edge evaluate MODEL --data BUNDLE --out p.json --threads 1` as a subprocess (`python -m edge.cli`,
            what the `edge` script runs, this tree first on PYTHONPATH), over the whole bundle and over a bundle of
            its first image; (N - 1) / (time(N) - time(1)) takes away process start, imports, the model's load and
            its first invoke, and leaves what the command does per image. N / time(N) is the rate a user sees.
Then, once, where the time of one image goes, each step alone in this process (medians over the images).
Target: command / bare >= 0.75 (issue 29). The report gives every round, the CPU the command's process used per
wall second, and the load average: the machine's 2 cores are shared.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "edge_detect_command.md"
TARGET = 0.75
MODEL = "model_int8.tflite"
MADE = "made.json"


# --- make: the run and its bundle (host venv) -------------------------------------------------------------------

def make(out: Path, epochs: int, heldout: int, head: str = "ssd", model: str = "small_cnn", size: int = 0,
         count: int = 0) -> int:
    """Train a detector (`head`: ssd or yolo; `model` its backbone, `size` its input, 0 the model's own) on `shapes`
    (`count` images, 0 the data set's default) with `heldout` separate held-out images, export int8, write the bundle."""
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"--out {out} is not empty; expected a new folder")
    run, bundle = out / "run", out / "bundle"
    drawn = f"&size={size}" if size else ""
    shaped = (["--model", model] if model != "small_cnn" else []) + (["--image-size", str(size)] if size else [])
    steps = [
        ["train", "--task", "detect", "--head", head, *shaped, "--data", f"shapes?count={count}{drawn}" if count else
         ("shapes" if not size else f"shapes?size={size}"), "--val-data", f"shapes?count={heldout}&seed=7{drawn}",
         "--epochs", str(epochs), "--no-tensorboard", "--out", str(run)],
        ["export", str(run), "--int8"],
        ["parity", str(run), "--bundle", str(bundle)],
    ]
    made = []
    for step in steps:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pipeline", *step], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pipeline {' '.join(step)} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        made.append({"command": shlex.join(["pipeline", *step]), "seconds": round(time.perf_counter() - start, 1)})
        print(f"{made[-1]['command']}: {made[-1]['seconds']} s", flush=True)
    manifest = json.loads((run / "manifest.json").read_text())
    model = manifest.get("model") or {}
    record = {"steps": made, "heldout": (manifest.get("metrics") or {}).get("heldout"),
              "model": {k: model.get(k) for k in ("name", "image_size", "parameters")}}
    (out / MADE).write_text(json.dumps(record, indent=1, default=str))
    return 0


# --- measure: the command against the bare rate (device venv) ---------------------------------------------------

def one_image_bundle(bundle: Path, work: Path) -> Path:
    """A bundle holding the first image of `bundle` alone, written by the bundle writer the pipeline uses."""
    from edge.documents.bundle import read_bundle, write_bundle
    from edge.pixels.contract import PixelContract
    from edge.files.documents import MANIFEST_NAME

    read = read_bundle(bundle)
    first = read.images[0]
    manifest = json.loads((bundle / MANIFEST_NAME).read_text())
    contract = PixelContract.from_record(manifest["preprocessing"], str(bundle / MANIFEST_NAME))
    return write_bundle(work / "one", read.labels or [], contract, [(first.id, None, (bundle / first.file).read_bytes())], {})


def timed_command(model: Path, data: Path, out: Path, expect: int):
    """(wall seconds, child CPU seconds) of one `edge evaluate` of this tree, as the classification bench times it."""
    from bench.edge.command import timed_command as timed_in_tree

    return timed_in_tree(ROOT, model, data, out, expect)


def command(model: Path, bundle: Path, one: Path, out: Path, count: int):
    """(images/s beyond the first, CPU seconds per wall second meanwhile, images/s of the whole command, time(1))."""
    t_all, cpu_all = timed_command(model, bundle, out, count)
    t_one, cpu_one = timed_command(model, one, out, 1)
    return (count - 1) / (t_all - t_one), (cpu_all - cpu_one) / (t_all - t_one), count / t_all, t_one


def bare_pass(detector, pixels, with_objects: bool = False):
    """(images / wall seconds, 1 / median image seconds, this thread's CPU seconds per image): set_input, invoke, the
    four outputs read, per image; with_objects: also edge.answers.detect.objects at threshold 0 (what `edge bench` counts as
    reading the detections)."""
    from edge.answers.detect import get_raw, objects

    interpreter, feed, indices = detector.runner.interpreter, detector.runner.feed, detector.indices
    times = []
    cpu, start = time.thread_time(), time.perf_counter()
    for p in pixels:
        begin = time.perf_counter()
        feed(p)
        interpreter.invoke()
        raw = get_raw(interpreter, indices)
        if with_objects:
            objects(raw, (1, 1), 0.0, detector.runner.labels)
        times.append(time.perf_counter() - begin)
    wall = time.perf_counter() - start
    return len(pixels) / wall, 1 / statistics.median(times), (time.thread_time() - cpu) / len(pixels)


def in_process(model: Path, detector, bundle: Path, out: Path):
    """(images/s, CPU seconds per wall second, the main thread's CPU seconds per image) of the command's work after the
    model is open, in this process (the decoding worker's CPU is in the second, not the third)."""
    from edge.answers.evaluation import detection_samples, detections_document, evaluate_detections
    from edge.documents.predictions import write_detections

    cpu, main, start = _cpu_seconds(), time.thread_time(), time.perf_counter()
    samples, labels = detection_samples(bundle, detector.runner.labels)
    entries, errors = evaluate_detections(detector, samples)
    write_detections(out, detections_document(model, detector, labels, entries, errors))
    wall = time.perf_counter() - start
    return len(samples) / wall, (_cpu_seconds() - cpu) / wall, (time.thread_time() - main) / len(samples)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rounds(model: Path, bundle: Path, one: Path, count: int, out: Path):
    from edge.answers.detect import open_detector
    from edge.answers.evaluation import detection_samples

    detector = open_detector(model, threads=1)
    samples, _ = detection_samples(bundle, detector.runner.labels)
    pixels = [detector.runner.pixels(s.path, str(s.path)) for s in samples]
    bare_pass(detector, pixels[:8])  # warm-up: first invokes
    in_process(model, detector, bundle, out)  # and the file cache
    timed_command(model, one, out, 1)
    paths = {"bare": lambda: bare_pass(detector, pixels),
             "bare_objects": lambda: bare_pass(detector, pixels, with_objects=True),
             "in_process": lambda: in_process(model, detector, bundle, out),
             "command": lambda: command(model, bundle, one, out, len(samples))}
    rows = []
    for r in range(count):
        steps = list(paths) if r % 2 == 0 else list(paths)[::-1]
        load = os.getloadavg()[0]
        rows.append({**{step: paths[step]() for step in steps}, "load": load})
    return detector, samples, pixels, rows


def breakdown(model: Path, detector, bundle: Path, samples, out: Path):
    """Milliseconds per image of each step of the command, each alone in this process, one after another."""
    from edge.answers import detect as det
    from edge.documents import predictions as predictions_doc
    from edge.answers.evaluation import detection_samples, detections_document

    runner, n = detector.runner, len(samples)
    steps = {"list the bundle, read and hash every image (sha256 check)": [], "decode to the input (contract pixels)": [],
             "set the input and invoke (the post-processing op inside)": [], "read the four outputs": [],
             "the detections at threshold 0 as the prediction entry": []}
    names = list(steps)
    start = time.perf_counter()
    detection_samples(bundle, runner.labels)
    listing = (time.perf_counter() - start) / n
    entries = []
    for s in samples:
        t0 = time.perf_counter()
        pixels = runner.pixels(s.path, str(s.path))
        t1 = time.perf_counter()
        runner.feed(pixels)
        runner.interpreter.invoke()
        t2 = time.perf_counter()
        raw = det.get_raw(runner.interpreter, detector.indices)
        t3 = time.perf_counter()
        entries.append(predictions_doc.detection(s.rel, s.id, s.sha256, *det.kept(raw, 0.0)))
        t4 = time.perf_counter()
        for name, seconds in zip(names[1:], (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            steps[name].append(seconds)
    start = time.perf_counter()
    predictions_doc.write_detections(out, detections_document(model, detector, runner.labels, entries, []))
    writing = (time.perf_counter() - start) / n
    result = {names[0]: listing * 1000}
    result.update({name: statistics.median(steps[name]) * 1000 for name in names[1:]})
    result["write the predictions JSON (compact, atomic, fsync)"] = writing * 1000
    objects = sum(len(e["objects"]) for e in entries)
    return result, objects / n, out.stat().st_size


def measure(folder: Path, count: int, write: bool) -> int:
    bundle = folder / "bundle"
    model = bundle / MODEL
    if not model.is_file():
        raise SystemExit(f"{model} not found; expected what `bench/edge/detect_command.py make --out {folder}` writes")
    made = json.loads((folder / MADE).read_text()) if (folder / MADE).is_file() else None
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="edge-detect-command-") as scratch:
        work = Path(scratch)
        one = one_image_bundle(bundle, work)
        detector, samples, pixels, rows = rounds(model, bundle, one, count, work / "p.json")
        steps, per_image_objects, json_bytes = breakdown(model, detector, bundle, samples, work / "b.json")
        text = report(detector, samples, pixels, rows, steps, per_image_objects, json_bytes, model, made, load_before)
    print(text)
    if write:
        RESULTS.write_text(text)
    return 0 if statistics.median(r["command"][0] / r["bare"][0] for r in rows) >= TARGET else 1


def _spread(values) -> str:
    values = list(values)
    return f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}, {len(values)} rounds)" if values else "no round"


def report(detector, samples, pixels, rows, steps, per_image_objects, json_bytes, model: Path, made, load_before) -> str:
    from bench.edge.machine import cpu_info, lscpu_block, source_commit

    runner = detector.runner
    backend = runner.loaded.backend
    version = getattr(sys.modules.get(backend.split(".")[0]), "__version__", "?")
    from edge.answers.detect import image_size

    n = len(samples)
    height, width = pixels[0].shape[:2]
    sizes = sorted({image_size(s.path) for s in samples})
    kinds = sorted({s.path.suffix.lstrip(".").upper() for s in samples})
    made_lines = [f"  - `{s['command']}` ({s['seconds']} s)" for s in (made or {}).get("steps", [])]
    heldout = (made or {}).get("heldout") or {}
    trained = ", ".join(f"{k} {v}" for k, v in ((made or {}).get("model") or {}).items() if v is not None)
    command_ms = statistics.median(1000 / r["command"][0] for r in rows)
    bare_ms = statistics.median(1000 / r["bare"][0] for r in rows)
    start_up = statistics.median(r["command"][3] for r in rows)
    lines = [
        "# `edge evaluate` on a detection bundle: images/s against the bare invoke + output-reading rate",
        "",
        f"- date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}, at commit {source_commit()}",
        f"- command: `{Path(sys.executable).parent.parent.name}/bin/python bench/edge/detect_command.py "
        f"{' '.join(sys.argv[1:])}`, after `bench/edge/detect_command.py make` (host venv) ran:",
        *made_lines,
        "- the run is deliberately tiny (a few epochs): speed, not accuracy, is measured"
        + (f"; detector {trained}" if trained else "")
        + (f"; its held-out mAP@.5 {heldout['map50']:.3f}" if isinstance(heldout.get("map50"), (int, float)) else ""),
        f"- what is timed: `python -m edge.cli evaluate {MODEL} --data BUNDLE --out p.json --threads 1` (what `edge` runs)"
        f" as a subprocess, over the bundle's {n} images and over a bundle of its first image; per image ="
        f" (time({n}) - time(1)) / {n - 1}",
        f"- bare: the same {n} images decoded beforehand; per image set the input, invoke, read the four outputs"
        " (boxes, class ids, scores, count); 1 thread",
        f"- CPU: {cpu_info()}; Python {platform.python_version()}, {platform.machine()}, numpy {np.__version__}",
        f"- interpreter: {backend} {version} ({runner.loaded.why}), 1 thread",
        f"- model: the run's int8 detector as shipped in the bundle ({model.stat().st_size / 1e6:.2f} MB, input"
        f" {width}x{height} uint8, ending in TFLite_Detection_PostProcess), checked against the bundle's manifest as the"
        " command checks it",
        f"- images: the bundle's {n} held-out `shapes` images as `pipeline parity --bundle` ships them"
        f" ({', '.join(f'{w}x{h}' for w, h in sizes)}, {'/'.join(kinds)}); {per_image_objects:.1f} objects per image written at threshold 0, a predictions"
        f" file of {json_bytes / 1e6:.2f} MB",
        f"- machine load (1-minute load average): {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after; the 2 cores"
        " are shared with other agents' work, so every ratio is taken within one round",
        "",
        *lscpu_block(),
        f"## {len(rows)} rounds: images/s, share of the bare rate, CPU seconds per wall second",
        "",
        "| round | bare images/s (1 / median image) | bare + objects (share of bare) | in process, after the model is open |"
        " `edge evaluate` per image | `edge evaluate` whole (start-up included) | time(1), s |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows):
        bare = r["bare"][0]
        lines.append(f"| {i + 1} | {bare:.1f} ({r['bare'][1]:.1f}) | {r['bare_objects'][0]:.1f} ({r['bare_objects'][0] / bare:.2f})"
                     f" | {r['in_process'][0]:.1f} ({r['in_process'][0] / bare:.2f};"
                     f" CPU {r['in_process'][1]:.2f}) | {r['command'][0]:.1f} ({r['command'][0] / bare:.2f}; CPU"
                     f" {r['command'][1]:.2f}) | {r['command'][2]:.1f} ({r['command'][2] / bare:.2f}) | {r['command'][3]:.2f} |")
    lines += [
        "",
        "| path | share of the bare rate, all rounds |",
        "|---|---|",
        f"| in process, after the model is open | {_spread(r['in_process'][0] / r['bare'][0] for r in rows)} |",
        f"| `edge evaluate` per image | {_spread(r['command'][0] / r['bare'][0] for r in rows)} |",
        f"| `edge evaluate` whole, start-up included | {_spread(r['command'][2] / r['bare'][0] for r in rows)} |",
        "",
        "Main thread CPU time per image, which waiting for a core on a loaded machine does not stretch: bare (set input,"
        " invoke, read) against the command's work in process after the model is open (listing, set input, invoke, read,"
        " entries, the JSON; the decoding runs on the worker thread, as it does on an idle 2-core machine beside the"
        " invoke). Its share estimates the command's rate on an idle machine when the worker keeps up and the two threads"
        " do not wait for each other (the GIL, the queue): an upper bound of the measured share, not a measurement of it.",
        "",
        "| round | load (1 min) | bare, ms | in process, main thread, ms | share (bare / in process) |",
        "|---|---|---|---|---|",
        *[f"| {i + 1} | {r['load']:.1f} | {r['bare'][2] * 1000:.3f} | {r['in_process'][2] * 1000:.3f} |"
          f" {r['bare'][2] / r['in_process'][2]:.2f} |" for i, r in enumerate(rows)],
        "",
        f"Main thread CPU share: {_spread(r['bare'][2] / r['in_process'][2] for r in rows)}.",
        "",
        "Against bare + objects (edge.answers.detect.objects at threshold 0 after the outputs are read, what `edge bench` reports as"
        f" reading the detections), `edge evaluate` per image is at {_spread(r['command'][0] / r['bare_objects'][0] for r in rows)}.",
        "",
        f"Target: `edge evaluate` >= {TARGET} of the bare rate. Per image the command took {command_ms:.2f} ms (median of"
        f" all rounds) against {bare_ms:.2f} ms bare; its start-up (imports, checks, model load, one image) {start_up:.2f} s.",
        "",
        "## Where one image's time goes: each step alone, in this process, after the rounds",
        "",
        "| step | ms per image (median; listing and writing: total / images) |",
        "|---|---|",
    ]
    lines += [f"| {name} | {ms:.3f} |" for name, ms in steps.items()]
    names_invoke_read = [name for name in steps if name.startswith(("set the input", "read the four"))]
    decode = next(ms for name, ms in steps.items() if name.startswith("decode"))
    serial = sum(steps.values()) - decode
    lines += [
        f"| sum | {sum(steps.values()):.3f} |",
        "",
        "The command decodes on a worker thread while the main thread invokes (its CPU / wall above 1 shows the overlap), so"
        f" its per-image time should come near the other steps' sum, {serial:.2f} ms, against {command_ms:.2f} ms measured;"
        f" of that, {serial - steps[names_invoke_read[0]] - steps[names_invoke_read[1]]:.2f} ms is work the bare path does"
        " not do (listing and hashing, the entries, the JSON).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    made = sub.add_parser("make", help="train a tiny detector, export int8, write its bundle (host venv)")
    made.add_argument("--out", type=Path, required=True)
    made.add_argument("--epochs", type=int, default=3)
    made.add_argument("--heldout", type=int, default=600, help="held-out images, the bundle's (separate --val-data)")
    made.add_argument("--head", choices=("ssd", "yolo"), default="ssd", help="the detector's head (default ssd)")
    made.add_argument("--model", default="small_cnn", help="the backbone (default small_cnn, a tiny one)")
    made.add_argument("--image-size", type=int, default=0, help="the input size (default: the model's own)")
    made.add_argument("--count", type=int, default=0, help="training images (default: the shapes data set's)")
    measured = sub.add_parser("measure", help="time `edge evaluate` on the bundle against the bare rate (device venv)")
    measured.add_argument("--dir", type=Path, required=True, help="what `make` wrote")
    measured.add_argument("--rounds", type=int, default=8)
    measured.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.what == "make":
        return make(args.out, args.epochs, args.heldout, args.head, args.model, args.image_size, args.count)
    return measure(args.dir, args.rounds, not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
