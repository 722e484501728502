"""`edge evaluate` with 1 and 2 decode workers against the bare invoke, for a classifier, an SSD-style detector and a
YOLO-head detector; threads against processes for the decode; and, on paper, the same on a 4-core Cortex-A53 board.

    # One command, in the device env (.ci/edge-env --make .venv39): missing inputs are made first with the host venv
    # (.venv, TensorFlow: --host-python), then measured and written to bench/results/edge_throughput.md
    .venv39/bin/python bench/edge/throughput.py --speed /tmp/edge_speed --detect /tmp/edge_detect \
        --yolo /tmp/edge_yolo --big /tmp/edge_ssd_mnv2 --big-yolo /tmp/edge_yolo_mnv2 --make --rounds 6
    # --make runs, for each folder that does not exist yet (a few minutes each on an idle 2-core machine):
    #   bench/edge/speed.py make --out SPEED --per-class 300                      int8 MobileNetV2 224, 600 JPEGs
    #   bench/edge/detect_command.py make --out DETECT --epochs 3 --heldout 600   tiny SSD-style detector
    #   bench/edge/detect_command.py make --out YOLO --epochs 3 --heldout 100 --head yolo   tiny YOLO-head one
    #   bench/edge/detect_command.py make --out BIG --epochs 1 --heldout 32 --model mobilenet_v2 --image-size 320
    #       --count 128       (with --big BIG) an SSD on MobileNetV2 at 320x320: an invoke of a board's detector's size
    #   the same with --head yolo (with --big-yolo BIG_YOLO): the YOLO head on that backbone at that size

It imports no TensorFlow. Every model runs on the CPU interpreter the device side picks, 1 thread, over the same
600 camera JPEGs (640x480). Round after round, in an order that alternates so drift in the machine's load hits
each alike:
  classifier bare    the input set once, one invoke per image: images / wall time of the pass
  detector bare      every image decoded beforehand; per image set the input, invoke (the post-processing op
                     inside), read the four outputs and keep the objects at threshold 0 (edge.answers.detect.objects):
                     the invoke plus the output reading a detector cannot do without
  yolo bare          the same for the YOLO head, whose reading is the host decode + NMS (edge.answers.heads.yolo)
  command, W workers `python -m edge.cli evaluate MODEL --data photos --out p.json --threads 1 --workers W` (what
                     `edge` runs) over all the JPEGs and over one; (N - 1) / (time(N) - time(1)) is what the
                     command does per image, start-up and model load taken away (bench/edge/command.py's method)
Then, once: the decode alone (the pixel contract's JPEG decode and resize, per input size) as CPU ms per image,
serial against 2 threads against 2 processes, and how much a decoding thread slows a pure-Python loop beside it
(the share of the decode that holds the GIL). From the measured decode cost and a stated x86-to-Cortex-A53 factor,
the board's images/s with 1 to 4 workers and the number of workers that keeps the Edge TPU busy.
Target (issue 43): the command >= 0.85 of the bare rate with nothing else running on the machine.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "edge_throughput.md"
TARGET = 0.85
WORKERS = (1, 2)

# x86 core here -> one Cortex-A53 core at 1.5 GHz. Coral's benchmark page (coral.ai/docs/edgetpu/benchmarks, Table 1)
# times 16 CNNs in TFLite on a desktop x86 CPU and on the Dev Board's embedded CPU (quad Cortex-A53): the embedded
# CPU is 2.4x (MobileNet v2) to 4.5x (Inception v4) slower, median 3.6x. The JPEG decode and resize are integer SIMD
# code like those kernels (libjpeg-turbo and Pillow use NEON on ARM), so the median is the factor, and the range
# its uncertainty. A Raspberry Pi 4 has Cortex-A72 cores, faster than the A53: for it these figures are pessimistic.
A53_FACTOR, A53_RANGE = 3.6, (2.4, 4.5)
BOARD_CORES = 4
# The Edge TPU's own invoke on the Dev Board, same table: MobileNet v2 (224x224) 2.6 ms; MobileNet v2 SSD 14 ms
# (its TFLite_Detection_PostProcess runs on the board's CPU inside the invoke).
TPU_MS = {"classifier": 2.6, "detector": 14.0}
# The pixel contract's input sizes decoded from the 640x480 JPEGs: the classifier's, this detector's, and the
# 300x300 of the usual SSD MobileNet (a JPEG is decoded at 1/2 for 224 and at full size for 300: 480 // 300 = 1).
DECODE_SIZES = {"classifier (224x224)": 224, "SSD detector here": None, "YOLO detector here": None,
                "SSD MobileNet (300x300)": 300}
DECODE_KEY = {"classifier": "classifier (224x224)", "detector": "SSD detector here", "yolo": "YOLO detector here",
              "big": "SSD MobileNetV2 detector here", "bigyolo": "YOLO MobileNetV2 detector here"}


# --- this machine: the command against the bare rate ------------------------------------------------------------

KINDS = {"classifier": "classifier", "detector": "SSD detector", "yolo": "YOLO detector", "big": "SSD MobileNetV2 320",
         "bigyolo": "YOLO MobileNetV2 320"}
# What `bench/edge/detect_command.py make` trains for the detectors of a board's invoke cost (--big, --big-yolo).
BIG_MAKE = ["--epochs", "1", "--heldout", "32", "--model", "mobilenet_v2", "--image-size", "320", "--count", "128"]


def command_rate(model: Path, photos: Path, one: Path, out: Path, count: int, workers: int):
    """(images/s beyond the first, the command's CPU seconds per wall second meanwhile, images/s of the whole command)."""
    from bench.edge.command import timed_command

    extra = ("--workers", str(workers))
    t_all, cpu_all = timed_command(ROOT, model, photos, out, count, extra)
    t_one, cpu_one = timed_command(ROOT, model, one, out, 1, extra)
    return (count - 1) / (t_all - t_one), (cpu_all - cpu_one) / (t_all - t_one), count / t_all


def classifier_bare(runner, count: int) -> float:
    from edge.answers.timing import invoke_seconds

    start = time.perf_counter()
    invoke_seconds(runner.interpreter, count)
    return count / (time.perf_counter() - start)


def rounds(speed: Path, detect_models: dict, work: Path, count: int):
    """Alternated rounds over the classifier and each detector ({"detector": SSD model, "yolo": YOLO model})."""
    from bench.edge.command import prepare, timed_command
    from bench.edge.detect_command import bare_pass
    from bench.edge.speed import exported_contract
    from edge.answers.detect import open_detector
    from edge.answers.runner import Runner
    from edge.answers.timing import feed_seeded_input

    model, photos, one = prepare(speed, work)
    files = sorted(photos.rglob("*.jpg"))
    runner = Runner.with_contract(model, exported_contract(speed), edgetpu=False, threads=1)
    feed_seeded_input(runner.interpreter)
    detectors = {kind: open_detector(m, threads=1) for kind, m in detect_models.items()}
    out = work / "p.json"
    classifier_bare(runner, 50)  # warm-up: first invokes, the file cache, the command's imports
    timed_command(ROOT, model, one, out, 1)
    paths = {"classifier bare": lambda: classifier_bare(runner, len(files))}
    for w in WORKERS:
        paths[f"classifier {w}"] = lambda w=w: command_rate(model, photos, one, out, len(files), w)
    for kind, detector in detectors.items():
        pixels = [detector.runner.pixels(f, str(f)) for f in files]
        bare_pass(detector, pixels[:50], with_objects=True)
        paths[f"{kind} bare"] = lambda d=detector, p=pixels: bare_pass(d, p, with_objects=True)[0]
        for w in WORKERS:
            paths[f"{kind} {w}"] = lambda w=w, m=detect_models[kind]: command_rate(m, photos, one, out, len(files), w)
    rows = []
    for r in range(count):
        steps = list(paths) if r % 2 == 0 else list(paths)[::-1]
        load = os.getloadavg()[0]
        row = {step: paths[step]() for step in steps}
        rows.append({**row, "load": load})
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[0] if isinstance(v, tuple) else v:.1f}" for k, v in row.items()), flush=True)
    return runner, detectors, files, rows


# --- the decode alone: its cost, threads against processes --------------------------------------------------------

_CONTRACT = None


def _load(job):
    """One image at one size through the pixel contract (module level: a process pool pickles it by name)."""
    path, size = job
    return _CONTRACT.load_pixels(path, (size, size), str(path)).shape


def decode_cpu_ms(files, size: int) -> float:
    """Median CPU ms (this thread's) of the contract's decode + resize of one JPEG to size x size."""
    times = []
    for f in files:
        start = time.thread_time()
        _load((f, size))
        times.append(time.thread_time() - start)
    return statistics.median(times) * 1000


def decode_rates(files, size: int, count: int):
    """{way: [(images/s, CPU seconds per wall second)]} of the decode alone: serial, 2 threads, 2 processes."""
    import resource

    jobs = [(f, size) for f in files]

    def cpu():
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def serial():
        for job in jobs:
            _load(job)

    def pool(kind):
        with kind(2) as ex:
            list(ex.map(_load, jobs, chunksize=1 if kind is ThreadPoolExecutor else 16))

    ways = {"serial": serial, "2 threads": lambda: pool(ThreadPoolExecutor), "2 processes": lambda: pool(ProcessPoolExecutor)}
    out = {way: [] for way in ways}
    for r in range(count):
        for way in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
            c, start = cpu(), time.perf_counter()
            ways[way]()
            wall = time.perf_counter() - start
            out[way].append((len(jobs) / wall, (cpu() - c) / wall))
    return out


def _decode_until(stop, files, size: int) -> None:
    while not stop.is_set():
        for f in files:
            if stop.is_set():
                break
            _load((f, size))


def gil_share(files, size: int, seconds: float = 1.5) -> float:
    """How fast a pure-Python loop runs with a decoding thread beside it, against a decoding process beside it: both
    take a core's worth of CPU, only the thread can hold the loop's GIL (1.0: the decode never holds the GIL the loop
    wants; 0.5: half the time). Thread and process alternate, three times each."""
    import multiprocessing

    def spin(duration):
        n, end = 0, time.perf_counter() + duration
        while time.perf_counter() < end:
            n += 1
        return n

    def beside(kind):
        stop = threading.Event() if kind == "thread" else multiprocessing.Event()
        cls = threading.Thread if kind == "thread" else multiprocessing.Process
        worker = cls(target=_decode_until, args=(stop, files, size))
        worker.start()
        time.sleep(0.2)  # the process imports nothing (forked), the thread starts at once: both decoding now
        n = spin(seconds)
        stop.set()
        worker.join()
        return n

    ratios = [beside("thread") / beside("process") for _ in range(3)]
    return statistics.median(ratios)


# --- on paper: a 4-core Cortex-A53 board with an Edge TPU ---------------------------------------------------------

def board_rate(decode_ms: float, main_ms: float, tpu_ms: float, workers: int) -> float:
    """Images/s on the board: the invoke thread takes main_ms of CPU plus the Edge TPU's tpu_ms per image (it waits on
    the device meanwhile, GIL released); `workers` threads decode at decode_ms of CPU each, on the cores the invoke
    thread leaves (4 minus its share of a core)."""
    period = tpu_ms + main_ms
    free_cores = BOARD_CORES - main_ms / period
    decode_period = decode_ms / min(workers, free_cores)
    return 1000 / max(period, decode_period)


def thread_costs(runner, detectors, files) -> dict:
    """{kind: (the invoking thread's CPU ms per image, the workers' CPU ms per image besides the decode, the invoking
    thread's CPU ms outside the invoke itself)}, each measured
    alone (no workers beside it, whose load on the caches would be counted otherwise). The invoking thread: the
    classifier's set_input, invoke, scores and prediction entry; a detector's set_input, invoke and the copy of its
    outputs (edge.answers.detect.read_outputs); both plus the pipeline's hand-over of one item. The workers besides the decode:
    a detector's reading (an anchor-free head's decode + NMS), its objects and its entry written as JSON."""
    from edge.answers import detect as det
    from edge.documents import predictions as predictions_doc
    from edge.answers.classify import invoke
    from edge.answers.evaluation import Sample, prediction
    from edge.files.prefetch import pipelined

    samples = [Sample(f, f.name, 0) for f in files[:200]]
    pixels = [runner.pixels(s.path) for s in samples]
    start = time.thread_time()
    for _ in pipelined(range(len(pixels)), lambda i: pixels[i], workers=2):
        pass
    handover = (time.thread_time() - start) / len(pixels)
    def invoking(interpreter) -> float:
        begin = time.thread_time()
        invoke(interpreter)
        return time.thread_time() - begin

    start, invokes = time.thread_time(), 0.0
    for s, p in zip(samples, pixels):
        runner.feed(p)
        invokes += invoking(runner.interpreter)
        prediction(s, runner.read_scores())
    main = (time.thread_time() - start) / len(samples) + handover
    costs = {"classifier": (main, 0.0, main - invokes / len(samples))}
    for kind, detector in detectors.items():
        interpreter, indices = detector.runner.interpreter, detector.indices
        det_pixels = [detector.runner.pixels(s.path) for s in samples]
        outputs, start, invokes = [], time.thread_time(), 0.0
        for p in det_pixels:
            detector.runner.feed(p)
            invokes += invoking(interpreter)
            outputs.append(det.read_outputs(interpreter, indices))
        main = (time.thread_time() - start) / len(samples) + handover
        start = time.thread_time()
        for s, o in zip(samples, outputs):
            predictions_doc.encoded_detection(s.rel, s.id, s.sha256, *det.kept(det.raw_of(o, indices), 0.0))
        costs[kind] = (main, (time.thread_time() - start) / len(samples), main - invokes / len(samples))
    return {kind: tuple(v * 1000 for v in values) for kind, values in costs.items()}


def _sleeps(thread_id: int) -> int:
    """Voluntary context switches of one thread so far (Linux: each is a wait that put it to sleep), or 0 elsewhere."""
    try:
        with open(f"/proc/self/task/{thread_id}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("voluntary_ctxt_switches"))
    except (OSError, StopIteration):
        return 0


def where_work_ran(detectors, files) -> dict:
    """{(kind, workers): (share of the decodes the invoking thread ran, share of the post-processings, its sleeps per
    image)}: `edge evaluate`'s in-process path (edge.answers.evaluation.evaluate_detections, as the command calls it) with each
    stage wrapped to note the thread it ran on. Counts, not times: they hold on a loaded machine too."""
    import edge.files.prefetch as prefetch_module
    from edge.answers.evaluation import Sample, evaluate_detections

    samples = [Sample(f, f.name, None) for f in files]
    caller = threading.current_thread().name
    result = {}
    real = prefetch_module.pipelined
    for kind, detector in detectors.items():
        for w in WORKERS:
            here = {"load": 0, "post": 0}

            def noted(stage, fn):
                def run(*args):
                    if threading.current_thread().name == caller:
                        here[stage] += 1
                    return fn(*args)
                return run

            def pipelined(items, load, run=None, post=None, **options):
                return real(items, noted("load", load), run, noted("post", post), **options)

            prefetch_module.pipelined = pipelined
            try:
                before = _sleeps(threading.get_native_id())
                evaluate_detections(detector, samples, workers=w, post_on_workers=True, encoded=True)
                sleeps = _sleeps(threading.get_native_id()) - before
            finally:
                prefetch_module.pipelined = real
            result[(kind, w)] = (here["load"] / len(samples), here["post"] / len(samples), sleeps / len(samples))
    return result


# The GIL switch intervals compared (sys.setswitchinterval): Python's default, which edge keeps, and shorter ones.
INTERVALS = (0.005, 0.001, 0.0005, 0.0002)
HANDOVER_IMAGES = 200  # JPEGs per pass of that comparison


def handover_shares(runner, detectors, files, count: int) -> dict:
    """{(kind, workers, interval): [(share of the bare rate, the invoking thread's sleeps per image) per round]}:
    `edge evaluate`'s path in this process (Runner.score_files; evaluate_detections as the command calls it) over
    the first HANDOVER_IMAGES JPEGs with sys.setswitchinterval at each interval, each round's passes in alternating order
    beside a bare pass, so the load hits each alike."""
    from bench.edge.detect_command import bare_pass
    from edge.answers.evaluation import Sample, evaluate_detections

    files = files[:HANDOVER_IMAGES]
    samples = [Sample(f, f.name, None) for f in files]

    def scored(w):
        for _, _, error in runner.score_files(files, workers=w):
            if error is not None:
                raise error

    paths = {"classifier": (lambda: classifier_bare(runner, len(files)), scored)}
    for kind, detector in detectors.items():
        pixels = [detector.runner.pixels(f, str(f)) for f in files]
        paths[kind] = (lambda d=detector, p=pixels: bare_pass(d, p, with_objects=True)[0],
                       lambda w, d=detector: evaluate_detections(d, samples, workers=w, post_on_workers=True, encoded=True))
    found, result = sys.getswitchinterval(), {}
    try:
        for kind, (bare, path) in paths.items():
            steps = [None] + [(w, interval) for w in WORKERS for interval in INTERVALS]
            for r in range(count):
                rates = {}
                for step in (steps if r % 2 == 0 else steps[::-1]):
                    if step is None:
                        rates[step] = bare()
                        continue
                    sys.setswitchinterval(step[1])
                    before, start = _sleeps(threading.get_native_id()), time.perf_counter()
                    path(step[0])
                    sys.setswitchinterval(found)
                    rates[step] = (len(files) / (time.perf_counter() - start),
                                   (_sleeps(threading.get_native_id()) - before) / len(files))
                for step in steps[1:]:
                    result.setdefault((kind, *step), []).append((rates[step][0] / rates[None], rates[step][1]))
    finally:
        sys.setswitchinterval(found)
    return result


def bare_cpu_ms(runner, detectors, files) -> dict:
    """CPU ms per image of the bare path on its own thread: the classifier's invoke; a detector's set input, invoke
    and reading the objects (the YOLO head's host decode + NMS included)."""
    from bench.edge.detect_command import bare_pass
    from edge.answers.timing import invoke_seconds

    start = time.thread_time()
    invoke_seconds(runner.interpreter, 200)
    costs = {"classifier": (time.thread_time() - start) / 200 * 1000}
    for kind, detector in detectors.items():
        pixels = [detector.runner.pixels(f, str(f)) for f in files[:200]]
        costs[kind] = bare_pass(detector, pixels, with_objects=True)[2] * 1000
    return costs


def idle_share(bare_ms: float, main_ms: float, work_ms: float, workers: int, cores: int = 2) -> float:
    """The share of the bare rate an idle machine of `cores` cores allows, from CPU costs alone: the invoking thread
    needs main_ms per image, the workers work_ms (decode and what else runs there), which the invoking thread takes
    its share of while it would wait (edge.files.prefetch), so `workers` + 1 threads share it, and all of it shares the
    cores. An upper bound (no cache or memory contention, no waiting between the threads)."""
    period = max(main_ms, (main_ms + work_ms) / min(cores, workers + 1))
    return bare_ms / period


# --- the report -------------------------------------------------------------------------------------------------

def _spread(values) -> str:
    values = list(values)
    return f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}, {len(values)} rounds)"


def report(runner, detectors, files, rows, decode, rates, gil, costs, bare_ms, uptime_before: str, uptime_after: str,
           argv, ran: dict, handover: dict) -> str:
    from bench.edge.machine import cpu_info, lscpu_block, source_commit

    backend = runner.loaded.backend
    version = getattr(sys.modules.get(backend.split(".")[0]), "__version__", "?")
    ssd, yolo = detectors["detector"].runner.size, detectors["yolo"].runner.size
    kinds = ["classifier", *detectors]
    lines = [
        "# Decode workers: `edge evaluate` images/s against the bare invoke, this machine and a 4-core board",
        "",
        f"- date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}, at commit {source_commit()}",
        f"- command: `{Path(sys.executable).parent.parent.name}/bin/python bench/edge/throughput.py {' '.join(argv)}` "
        "(with --make, inputs missing are made first: `bench/edge/speed.py make --per-class 300`, "
        "`bench/edge/detect_command.py make --epochs 3 --heldout 600`, the same with `--heldout 100 --head yolo`"
        + (f" and `{' '.join(BIG_MAKE)}`" if "big" in detectors else "")
        + (f" and `{' '.join(BIG_MAKE)} --head yolo`" if "bigyolo" in detectors else "")
        + ")",
        f"- what is timed: `python -m edge.cli evaluate MODEL --data photos --out p.json --threads 1 --workers W` as a "
        f"subprocess over {len(files)} JPEGs (640x480) and over 1; per image = (time({len(files)}) - time(1)) / {len(files) - 1}",
        f"- CPU: {cpu_info()}; Python {platform.python_version()}, {platform.machine()}, numpy {np.__version__}",
        f"- interpreter: {backend} {version} ({runner.loaded.why}), 1 thread",
        "- classifier: MobileNetV2 1.0 224 int8 as `pipeline export --int8` writes it (uint8 input, scale 1/128, zero "
        "point 128; 10 classes), its sidecar recording the contract (JPEGs decoded at 1/2 scale, 320x240, then resized)",
        f"- SSD detector: the tiny detection run's int8 model (input {ssd[0]}x{ssd[1]}, ending in TFLite_Detection_PostProcess "
        "as SSD detectors do), checked against its run's manifest; the same JPEGs (decoded at the contract's reduced scale)",
        f"- YOLO detector: the tiny `--head yolo` run's int8 model (input {yolo[0]}x{yolo[1]}, two outputs decoded on the host: "
        "edge.answers.heads.yolo's decode + NMS), checked against its run's manifest; the same JPEGs",
        *([f"- SSD MobileNetV2 320: a detection run on a MobileNetV2 backbone at input {detectors['big'].runner.size[0]}x"
           f"{detectors['big'].runner.size[1]} (1 epoch on 128 shapes images: its accuracy is not what is measured), ending "
           "in TFLite_Detection_PostProcess: an invoke of the cost of the detectors boards run (Google's SSD MobileNet "
           "in shared/reference/coral is there only compiled for the Edge TPU, which this CPU interpreter cannot run); "
           "the same JPEGs, decoded at full size (480 // 320 = 1)"] if "big" in detectors else []),
        *(["- YOLO MobileNetV2 320: the same backbone, input and training with the `--head yolo` head (two outputs decoded "
           "on the host, edge.answers.heads.yolo's decode + NMS): the YOLO head judged at an invoke of a board detector's cost; "
           "the same JPEGs"] if "bigyolo" in detectors else []),
        f"- machine load (`uptime`): before `{uptime_before}`; after `{uptime_after}`. A load near the core count means "
        "nothing else ran beside the benchmark; above it, other work shared the cores, and every ratio is taken "
        "within one round so that the load hits each alike",
        "",
        *lscpu_block(),
        f"## This machine, {len(rows)} rounds: images/s and the share of the bare rate",
        "",
        "Bare: the classifier's invoke alone; a detector's set input + invoke + reading the objects (threshold 0; the "
        "YOLO head's host decode + NMS included). Command: per image beyond the first (share of the bare rate in that "
        "round; the command's CPU seconds per wall second).",
        "",
    ]
    header = ["round", "load"]
    for kind in kinds:
        header += [f"{KINDS[kind]} bare"] + [f"{KINDS[kind]}, {w} worker{'s' if w > 1 else ''}" for w in WORKERS]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def cell(r, key, kind):
        rate, cpu = r[key][0], r[key][1]
        return f"{rate:.1f} ({rate / r[f'{kind} bare']:.2f}; CPU {cpu:.2f})"

    for i, r in enumerate(rows):
        cells = [f"{i + 1}", f"{r['load']:.1f}"]
        for kind in kinds:
            cells += [f"{r[f'{kind} bare']:.1f}"] + [cell(r, f"{kind} {w}", kind) for w in WORKERS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| model | workers | share of the bare rate, per image | the whole command (start-up included) / bare |",
              "|---|---|---|---|"]
    for kind in kinds:
        for w in WORKERS:
            lines.append(f"| {KINDS[kind]} | {w} | {_spread(r[f'{kind} {w}'][0] / r[f'{kind} bare'] for r in rows)} | "
                         f"{_spread(r[f'{kind} {w}'][2] / r[f'{kind} bare'] for r in rows)} |")
    lines += [
        "",
        f"Target: >= {TARGET} of the bare rate with nothing else running.",
        "",
        "What an idle machine with these 2 cores allows at most, from CPU costs measured here (one thread's CPU ms per "
        "image, which waiting for a core does not stretch; contention for caches under load still inflates them): the "
        "invoking thread needs its own (set the input, invoke, copy the outputs, the hand-over), the workers the decode "
        "plus what runs there (a detector's objects and its entry as JSON; the YOLO head's decode + NMS), which the "
        "invoking thread takes a share of while it would otherwise wait (edge.files.prefetch), and all of it shares the 2 cores: "
        "bare / max(invoking thread, (invoking thread + workers) / min(2, W + 1)).",
        "",
        "| model | bare, CPU ms | invoking thread, CPU ms | workers: decode + the rest, CPU ms | upper bound, 1 worker | upper bound, 2 workers |",
        "|---|---|---|---|---|---|",
    ]
    for kind in kinds:
        b, (m, post, _), d = bare_ms[kind], costs[kind], decode[DECODE_KEY[kind]]
        lines.append(f"| {KINDS[kind]} | {b:.2f} | {m:.2f} | {d:.2f} + {post:.2f} | {idle_share(b, m, d + post, 1):.2f} | "
                     f"{idle_share(b, m, d + post, 2):.2f} |")
    short = [kind for kind in kinds if idle_share(bare_ms[kind], costs[kind][0], decode[DECODE_KEY[kind]] + costs[kind][1], 2)
             < TARGET]
    if short:
        lines += ["", "Out of reach on 2 cores, whatever the threads do: " + "; ".join(
            f"the {KINDS[kind]}, whose bare path costs {bare_ms[kind]:.2f} ms of CPU against {decode[DECODE_KEY[kind]]:.2f} ms "
            f"for the decode of its JPEG (x{decode[DECODE_KEY[kind]] / bare_ms[kind]:.2f})" for kind in short)
            + f": the two cores cannot both invoke and decode fast enough for {TARGET} of the bare rate. A board's detector "
            "costs more than its decode (the SSD MobileNetV2 320 row), and there the ratio measures the arrangement."]
    lines += ["", "Where the work ran: `edge evaluate`'s path in this process over the same JPEGs, each stage noting its "
              "thread. While it would wait for the next image the invoking thread runs a decode or post-processing no "
              "worker has started (edge.files.prefetch); its sleeps are its voluntary context switches (Linux). Counts, which "
              "a loaded machine does not distort as it does times.", "",
              "| detector | workers | decodes on the invoking thread | post-processings on it | its sleeps per image |",
              "|---|---|---|---|---|"]
    for (kind, w), (loads, posts, sleeps) in ran.items():
        lines.append(f"| {KINDS[kind]} | {w} | {loads:.0%} | {posts:.0%} | {sleeps:.2f} |")
    lines += handover_section(handover, kinds)
    lines += [
        "",
        "## The decode alone: its cost, and threads against processes",
        "",
        "The pixel contract's decode + resize of one 640x480 JPEG (edge.pixels.contract.PixelContract.load_pixels), CPU ms of "
        "the decoding thread, median over the images:",
        "",
        "| input size | CPU ms per image here | on a Cortex-A53 (x" + f"{A53_FACTOR}, range x{A53_RANGE[0]} to x{A53_RANGE[1]}) |",
        "|---|---|---|",
    ]
    for name, ms in decode.items():
        lines.append(f"| {name} | {ms:.2f} | {ms * A53_FACTOR:.1f} ({ms * A53_RANGE[0]:.1f} to {ms * A53_RANGE[1]:.1f}) |")
    lines += ["", "Decode only, classifier size, 2 workers: images/s (CPU seconds per wall second). Threads scale as "
              "processes do when the decode releases the GIL; processes also pay a pickled image back per item.", "",
              "| way | images/s | CPU / wall |", "|---|---|---|"]
    for way, values in rates.items():
        lines.append(f"| {way} | {_spread(v[0] for v in values)} | {_spread(v[1] for v in values)} |")
    lines += ["", f"A pure-Python loop runs at **{gil:.2f}** of the speed it has beside a decoding process while a thread "
              "decodes beside it instead (1.0: the decode never holds the GIL the loop wants; both take a core). The "
              "workers are threads: edge.files.prefetch.", ""]
    lines += board_section(decode, costs)
    return "\n".join(lines) + "\n"


def handover_section(handover: dict, kinds) -> list:
    rounds = len(next(iter(handover.values())))
    lines = ["", "## The GIL hand-over: the switch interval while workers run", "",
             "The invoking thread comes back from an invoke (GIL released inside) to a worker running Python code (a JPEG "
             "header, a decode + NMS in numpy, an entry written as JSON) and waits for the GIL until that code lets it go "
             "or the switch interval (sys.setswitchinterval; Python's default 5 ms, which `edge` keeps) makes it. "
             f"`edge evaluate`'s path in this process over {HANDOVER_IMAGES} of the JPEGs with each interval, "
             f"{rounds} rounds, each pass beside a bare pass in the same round: the share of the bare rate (median) and the "
             "invoking thread's sleeps per image (median). A shorter interval is worth setting in `edge` where it raises "
             "the share on a quiet machine.", "",
             "| model | workers | " + " | ".join(f"{i * 1000:g} ms" for i in INTERVALS) + " |",
             "|---|---|" + "---|" * len(INTERVALS)]
    for kind in kinds:
        for w in WORKERS:
            cells = [f"{statistics.median(v[0] for v in handover[(kind, w, i)]):.2f} "
                     f"({statistics.median(v[1] for v in handover[(kind, w, i)]):.1f})" for i in INTERVALS]
            lines.append(f"| {KINDS[kind]} | {w} | " + " | ".join(cells) + " |")
    return lines


def board_section(decode, costs) -> list:
    """`costs`: thread_costs' {kind: (invoking thread, workers besides the decode, invoking thread outside the invoke)}."""
    lines = [
        "## On paper: a 4-core Cortex-A53 board (Coral Dev Board) with its Edge TPU",
        "",
        f"Factor x{A53_FACTOR} from this machine's core to one Cortex-A53 at 1.5 GHz: the median ratio of Coral's "
        "benchmark table (coral.ai/docs/edgetpu/benchmarks, Table 1: 16 CNNs in TFLite, desktop x86 CPU against the "
        f"Dev Board's embedded quad Cortex-A53; x{A53_RANGE[0]} for MobileNet v2 to x{A53_RANGE[1]} for Inception v4). "
        f"Edge TPU invoke from the same table's Dev Board column: {TPU_MS['classifier']} ms for MobileNet v2 224, "
        f"{TPU_MS['detector']} ms for MobileNet v2 SSD (its post-processing op on the CPU included). The invoke thread also "
        "spends CPU around the invoke (set the input, copy the outputs, the hand-over from the workers): measured here "
        "alone, scaled by the same factor. Workers decode, and for a detector read its objects and write its entry (the "
        "tiny SSD's cost here, 25 objects as the op keeps), on the cores the invoke "
        "thread leaves; the invoke itself waits on the Edge TPU with the GIL released. A Raspberry Pi 4 (Cortex-A72) is "
        "faster per core than this estimate."
        + (" The YOLO row's workers also decode its two outputs and run NMS on the host (measured here on the YOLO "
           "MobileNetV2 320, scaled); Coral's table has no YOLO-head model, so its Edge TPU time is taken as MobileNet v2 "
           "SSD's (the same backbone at a similar input): an assumption, which a faster YOLO invoke would only make "
           "need more workers." if "bigyolo" in costs else ""),
        "",
        "| model | decode (+ objects and entry) on the board, ms | around the invoke, ms | Edge TPU, ms | images/s with 1 / 2 / 3 / 4 workers "
        "(share of the bare Edge TPU rate) | workers that keep the Edge TPU busy |",
        "|---|---|---|---|---|---|",
    ]
    rows = [("MobileNetV2 224, 640x480 JPEG", "classifier", "classifier (224x224)", TPU_MS["classifier"]),
            ("SSD MobileNet 300x300, 640x480 JPEG", "detector", "SSD MobileNet (300x300)", TPU_MS["detector"])]
    if "bigyolo" in costs:
        rows.append(("YOLO head on MobileNetV2 320x320, 640x480 JPEG (Edge TPU time assumed: MobileNet v2 SSD's)",
                     "bigyolo", DECODE_KEY["bigyolo"], TPU_MS["detector"]))
    for name, kind, decode_key, tpu in rows:
        d = (decode[decode_key] + costs[kind][1]) * A53_FACTOR
        m = costs[kind][2] * A53_FACTOR
        rates = [board_rate(d, m, tpu, w) for w in range(1, BOARD_CORES + 1)]
        best = max(rates)
        enough = next(w for w, r in enumerate(rates, 1) if r >= best * 0.999)
        cells = " / ".join(f"{r:.0f} ({r * tpu / 1000:.2f})" for r in rates)
        lines.append(f"| {name} | {d:.1f} | {m:.2f} | {tpu} | {cells} | {enough} (ceil({d:.1f} / ({tpu} + {m:.2f})) = "
                     f"{math.ceil(d / (tpu + m))}) |")
    lines += ["", "The default (`--workers` not given) is one worker per core the process may use: 4 on these boards, "
              "which the table shows is enough; more than the Edge TPU needs costs nothing but a thread each.", ""]
    return lines


def uptime() -> str:
    import subprocess

    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def make_missing(speed: Path, detect: Path, yolo: Path, host_python: Path, big: Optional[Path] = None,
                 big_yolo: Optional[Path] = None) -> None:
    """Make each input folder that does not exist yet with the host venv (TensorFlow), as the docstring lists."""
    import subprocess

    steps = [(speed, ["bench/edge/speed.py", "make", "--out", str(speed), "--per-class", "300"]),
             (detect, ["bench/edge/detect_command.py", "make", "--out", str(detect), "--epochs", "3", "--heldout", "600"]),
             (yolo, ["bench/edge/detect_command.py", "make", "--out", str(yolo), "--epochs", "3", "--heldout", "100",
                     "--head", "yolo"])]
    if big is not None:
        steps.append((big, ["bench/edge/detect_command.py", "make", "--out", str(big), *BIG_MAKE]))
    if big_yolo is not None:
        steps.append((big_yolo, ["bench/edge/detect_command.py", "make", "--out", str(big_yolo), *BIG_MAKE, "--head", "yolo"]))
    for folder, step in steps:
        if folder.exists():
            continue
        print(f"making {folder}: {host_python} {' '.join(step)}", flush=True)
        done = subprocess.run([str(host_python), *step], cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(f"{host_python} {' '.join(step)} failed (exit {done.returncode})")


READING = "## Reading this run (hand-written"  # the results file's own notes start here; a rerun keeps them


def kept_reading(results: Path) -> str:
    """The hand-written reading at the end of the results file (from READING on), kept under the new numbers."""
    old = results.read_text() if results.exists() else ""
    at = old.find(READING)
    return "" if at < 0 else "\n" + old[at:]


def run(speed: Path, detect: Path, yolo: Path, count: int, write: bool, argv, big: Optional[Path] = None,
        big_yolo: Optional[Path] = None) -> int:
    global _CONTRACT
    from bench.edge.speed import exported_contract

    extra = {kind: folder for kind, folder in (("big", big), ("bigyolo", big_yolo)) if folder is not None}
    for folder in (speed, detect, yolo, *extra.values()):
        if not folder.is_dir():
            raise SystemExit(f"{folder} does not exist; pass --make (with the host venv at --host-python) to make it")
    _CONTRACT = exported_contract(speed)
    before = uptime()
    models = {"detector": detect / "run" / "model_int8.tflite", "yolo": yolo / "run" / "model_int8.tflite"}
    models.update({kind: folder / "run" / "model_int8.tflite" for kind, folder in extra.items()})
    with tempfile.TemporaryDirectory(prefix="edge-throughput-") as scratch:
        runner, detectors, files, rows = rounds(speed, models, Path(scratch), count)
        own = {DECODE_KEY[kind]: detector.runner.size[0] for kind, detector in detectors.items()}
        sizes = {name: size or own[name] for name, size in {**DECODE_SIZES, **dict.fromkeys(own)}.items()}
        decode = {name: decode_cpu_ms(files[:200], size) for name, size in sizes.items()}
        rates = decode_rates(files, 224, max(2, count // 2))
        gil = gil_share(files, 224)
        costs = thread_costs(runner, detectors, files)
        bare_ms = bare_cpu_ms(runner, detectors, files)
        ran = where_work_ran(detectors, files)
        handover = handover_shares(runner, detectors, files, max(3, count // 2))
        text = report(runner, detectors, files, rows, decode, rates, gil, costs, bare_ms, before, uptime(), argv, ran,
                      handover)
    print(text)
    if write:
        RESULTS.write_text(text + kept_reading(RESULTS))
    shares = [statistics.median(r[f"{kind} {w}"][0] / r[f"{kind} bare"] for r in rows)
              for kind in ["classifier", *models] for w in WORKERS]
    return 0 if min(shares) >= TARGET else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=Path, required=True, help="what `bench/edge/speed.py make` wrote")
    parser.add_argument("--detect", type=Path, required=True, help="what `bench/edge/detect_command.py make` wrote")
    parser.add_argument("--yolo", type=Path, required=True, help="what `bench/edge/detect_command.py make --head yolo` wrote")
    parser.add_argument("--big", type=Path, default=None,
                        help="also an SSD on MobileNetV2 at 320x320 (`bench/edge/detect_command.py make --model mobilenet_v2 "
                             "--image-size 320`): a detector whose invoke costs what a board's does")
    parser.add_argument("--big-yolo", type=Path, default=None,
                        help="also the YOLO head on that backbone and size (the same make with --head yolo)")
    parser.add_argument("--make", action="store_true", help="make the input folders that do not exist yet (host venv)")
    parser.add_argument("--host-python", type=Path, default=ROOT / ".venv" / "bin" / "python",
                        help="the host venv's python (TensorFlow) that --make runs (default: .venv/bin/python)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.make:
        make_missing(args.speed, args.detect, args.yolo, args.host_python, args.big, args.big_yolo)
    return run(args.speed, args.detect, args.yolo, args.rounds, not args.no_write, sys.argv[1:], args.big, args.big_yolo)


if __name__ == "__main__":
    sys.exit(main())
