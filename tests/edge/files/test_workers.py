"""Decode workers (edge.files.prefetch, edge.files.workers): the same answers byte for byte with 1 and N workers, input order
kept whatever order the workers finish in, a bounded look-ahead, --workers 0 refused, and a stop that ends the
command with its workers."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edge.files import workers as workers_mod
from edge.errors import InputError
from edge.model.integrity import write_sidecar
from edge.pixels.contract import PixelContract
from edge.files.prefetch import look_ahead, pipelined, prefetch
from edge.answers.runner import Runner
from tests.support.edge_paths import FIXTURES, LABELS, run_edge

DETECTOR = FIXTURES / "tiny_detector_int8.tflite"
REPO = Path(__file__).resolve().parents[3]


def _photos(root: Path, per_class: int = 12, damaged: bool = True) -> Path:
    """Class folders of JPEGs and PNGs of different sizes (one damaged in the middle of the order)."""
    rng = np.random.default_rng(3)
    for c, name in enumerate(LABELS):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            h, w = int(rng.integers(20, 300)), int(rng.integers(20, 300))
            pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            pixels[..., c] = 255  # each class leans to its colour
            Image.fromarray(pixels).save(root / name / f"{i:02d}.{'jpg' if i % 2 else 'png'}")
    if damaged:
        (root / LABELS[1] / "05.jpg").write_bytes(b"not an image")
    return root


@pytest.fixture
def classifier(int8_copy: Path) -> Path:
    write_sidecar(int8_copy, labels=LABELS, preprocessing=PixelContract().as_record())
    return int8_copy


def _evaluate(model: Path, data: Path, out: Path, *workers: str):
    """(the result, the predictions' bytes), the same file name each time in a folder of its own, and the command
    run in that folder: the stdout naming it is comparable too."""
    out.mkdir()
    here = os.getcwd()
    os.chdir(out)
    try:
        result = run_edge("evaluate", model, "--data", data, "--out", "p.json", *(("--workers",) + workers if workers else ()))
    finally:
        os.chdir(here)
    return result, (out / "p.json").read_bytes()


def test_evaluate_writes_the_same_bytes_with_1_and_n_workers_classifier(classifier: Path, tmp_path: Path):
    data = _photos(tmp_path / "data")
    one, one_bytes = _evaluate(classifier, data, tmp_path / "one", "1")
    many, many_bytes = _evaluate(classifier, data, tmp_path / "many", "4")
    default, default_bytes = _evaluate(classifier, data, tmp_path / "default")
    assert one.exit_code == many.exit_code == default.exit_code == 1  # the damaged image, named
    assert "green/05.jpg" in many.stderr and "1 of 36 images could not be read" in many.stderr
    assert one_bytes == many_bytes == default_bytes
    document = json.loads(one_bytes)
    files = [p["file"] for p in document["predictions"]]
    assert files == sorted(files) and len(files) == 35  # folder order, every readable image once
    assert one.stdout == many.stdout == default.stdout


def test_evaluate_writes_the_same_bytes_with_1_and_n_workers_detector(tmp_path: Path):
    data = tmp_path / "images"
    rng = np.random.default_rng(11)
    for i in range(30):
        folder = data / ("sub" if i % 3 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        h, w = int(rng.integers(30, 200)), int(rng.integers(30, 200))
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(folder / f"{i:02d}.png")
    outputs = {}
    for n in ("1", "3"):
        result, outputs[n] = _evaluate(DETECTOR, data, tmp_path / f"p{n}", n)
        assert result.exit_code == 0, result.stderr
    assert outputs["1"] == outputs["3"]
    document = json.loads(outputs["1"])
    assert len(document["predictions"]) == 30 and sum(len(p["objects"]) for p in document["predictions"]) > 0


def test_evaluate_detections_post_on_workers_gives_the_same_entries():
    from edge.answers import detect as det
    from edge.answers.evaluation import Sample, evaluate_detections

    images = sorted((FIXTURES / "images").glob("*.png")) * 5
    samples = [Sample(f, f"{i}/{f.name}", None) for i, f in enumerate(images)]
    detector = det.open_detector(DETECTOR, verify_sha256=False)
    inline = evaluate_detections(detector, samples, workers=1)
    on_workers = evaluate_detections(detector, samples, workers=3, post_on_workers=True)
    assert json.dumps(inline) == json.dumps(on_workers)
    assert [e["file"] for e in inline[0]] == [s.rel for s in samples]
    # Another head's decoding (a YOLO decode + NMS would be one) plugs in as `read` and `decode`, on the workers too.
    best = evaluate_detections(detector, samples, workers=3, post_on_workers=True,
                               read=lambda d: det.get_raw(d.runner.interpreter, d.indices),
                               decode=lambda raw: tuple(a[:1] for a in det.kept(raw, 0.0)))
    assert [e["objects"] for e in best[0]] == [e["objects"][:1] for e in inline[0]]


def test_classify_a_folder_gives_the_same_lines_with_1_and_n_workers(classifier: Path, tmp_path: Path):
    data = _photos(tmp_path / "data", per_class=6, damaged=False)
    one = run_edge("classify", classifier, data, "--workers", "1")
    many = run_edge("classify", classifier, data, "--workers", "3")
    assert one.exit_code == many.exit_code == 0, one.stderr + many.stderr
    assert one.stdout == many.stdout
    named = [line[:-1] for line in one.stdout.splitlines() if not line.startswith(" ")]
    assert named == [str(f) for f in sorted(data.rglob("*")) if f.is_file()]


def test_detect_a_folder_gives_the_same_lines_with_1_and_n_workers(tmp_path: Path):
    data = tmp_path / "images"
    data.mkdir()
    for f in sorted((FIXTURES / "images").glob("*.png")):
        for i in range(4):
            shutil.copy(f, data / f"{i}_{f.name}")
    runs = {}
    for n in ("1", "4"):  # the objects read and the boxes drawn on the workers too: the same files
        out = tmp_path / f"w{n}"
        runs[n] = run_edge("detect", DETECTOR, data, "--workers", n, "--threshold", "0", "--out", out / "drawn",
                           "--json", out / "objects.json")
        assert runs[n].exit_code == 0, runs[n].stderr
    one, many = runs["1"], runs["4"]
    assert one.stdout == many.stdout and one.stdout.count("object(s)") == 12
    files = {n: {f.relative_to(tmp_path / f"w{n}"): f.read_bytes() for f in sorted((tmp_path / f"w{n}").rglob("*.*"))}
             for n in runs}
    assert files["1"] == files["4"] and len(files["1"]) == 13


def test_a_folder_without_images_is_refused_by_name(classifier: Path, tmp_path: Path):
    (tmp_path / "empty").mkdir()
    result = run_edge("classify", classifier, FIXTURES / "images" / "red.png", tmp_path / "empty")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert f"folder {tmp_path / 'empty'} holds no images" in result.stderr and result.stdout == ""


@pytest.mark.parametrize("command", ["evaluate", "classify", "detect"])
@pytest.mark.parametrize("value", ["0", "-2"])
def test_workers_below_one_are_refused_in_one_line(classifier: Path, tmp_path: Path, command, value):
    out = tmp_path / "p.json"
    args = {"evaluate": ("evaluate", classifier, "--data", _photos(tmp_path / "d", 1, False), "--out", out),
            "classify": ("classify", classifier, FIXTURES / "images" / "red.png"),
            "detect": ("detect", DETECTOR, FIXTURES / "images" / "red.png")}[command]
    result = run_edge(*args, "--workers", value)
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: --workers {value}, expected a whole number of decode workers, 1 or more "
        f"(default: one per core this process may use, {workers_mod.available_cores()}, one fewer on the CPU "
        "interpreter)"]
    assert not out.exists()


def test_the_default_is_the_cores_this_process_may_use_and_falls_back_without_affinity(monkeypatch):
    if hasattr(os, "sched_getaffinity"):
        assert workers_mod.default_workers() == len(os.sched_getaffinity(0))
        monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert workers_mod.default_workers() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # os.cpu_count may not know
    assert workers_mod.default_workers() == 1
    assert workers_mod.checked_workers(None) == 1 and workers_mod.checked_workers(3) == 3


def test_the_cpu_interpreter_leaves_a_core_to_the_invoke(monkeypatch):
    """On the CPU interpreter the invoke takes a core of its own (bench/results/edge_throughput.md: on 2 cores 1
    worker beat 2 for every model), so the default is one worker fewer than the cores, and never none."""
    monkeypatch.setattr(workers_mod, "available_cores", lambda: 4)
    assert workers_mod.default_workers(edgetpu=True) == 4 and workers_mod.default_workers(edgetpu=False) == 3
    assert workers_mod.checked_workers(None, edgetpu=False) == 3 and workers_mod.checked_workers(2, edgetpu=False) == 2
    monkeypatch.setattr(workers_mod, "available_cores", lambda: 1)
    assert workers_mod.default_workers(edgetpu=False) == 1


def test_a_runner_sizes_the_default_by_its_interpreter(classifier: Path):
    """The default is chosen where the interpreter is known: this CPU interpreter's runner leaves the invoke a core."""
    runner = Runner.open(classifier)
    assert not runner.loaded.edgetpu
    assert runner.workers(None) == max(1, workers_mod.available_cores() - 1) and runner.workers(5) == 5
    with pytest.raises(InputError, match="--workers 0, expected"):
        workers_mod.checked_workers(0)
    with pytest.raises(InputError):
        list(prefetch([1], lambda i: i, workers=-1))


def _jittered(i: int) -> int:
    time.sleep(random.Random(i).uniform(0, 0.02))  # later items often finish first
    return i


def test_order_is_kept_whatever_order_the_workers_finish_in():
    got = list(pipelined(range(40), _jittered, run=lambda i, v: v * 2, post=lambda i, v: _jittered(v) + 1, workers=4,
                         post_on_workers=True))
    assert [item for item, _, _ in got] == list(range(40))
    assert [value for _, value, _ in got] == [2 * i + 1 for i in range(40)]


def test_a_load_error_stays_with_its_item_and_post_and_run_skip_it():
    def load(i):
        if i % 7 == 3:
            raise InputError(f"cannot read {i}")
        return _jittered(i)

    ran = []
    got = list(pipelined(range(20), load, run=lambda i, v: ran.append(i) or v, post=lambda i, v: -v, workers=3,
                         post_on_workers=True))
    assert [e is None for _, _, e in got] == [i % 7 != 3 for i in range(20)]
    assert [v for _, v, e in got if e is None] == [-i for i in range(20) if i % 7 != 3]
    assert ran == [i for i in range(20) if i % 7 != 3]  # the interpreter's stage runs one item at a time, in order


class _Counted:
    """An iterator that counts how far it was read."""

    def __init__(self, n: int):
        self.read, self.n = 0, n

    def __iter__(self):
        return self

    def __next__(self):
        if self.read >= self.n:
            raise StopIteration
        self.read += 1
        return self.read - 1


@pytest.mark.parametrize("post_on_workers", [False, True])
def test_a_slow_consumer_does_not_make_the_workers_read_every_image_ahead(post_on_workers):
    source = _Counted(1000)
    stream = pipelined(source, lambda i: i, post=lambda i, v: v, workers=4, post_on_workers=post_on_workers)
    next(stream)
    time.sleep(0.3)  # unbounded workers would have read all 1000 by now
    bound = look_ahead(4) + 4 + 1  # decoded ahead, post-processings handed back at most `workers` behind, the one yielded
    assert source.read <= bound
    for _ in range(10):
        next(stream)
        time.sleep(0.01)
    assert source.read <= 11 + bound
    stream.close()
    assert source.read < 1000


def test_stopping_early_leaves_no_worker_behind():
    stream = pipelined(range(1000), lambda i: time.sleep(0.01) or i, workers=4)
    assert next(stream)[1] == 0
    stream.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("edge-decode")]


def test_an_error_of_the_post_processing_propagates_and_ends_the_workers():
    def post(i, v):
        if i == 5:
            raise RuntimeError("bug in a decoder")
        return v

    with pytest.raises(RuntimeError, match="bug in a decoder"):
        list(pipelined(range(50), _jittered, post=post, workers=3, post_on_workers=True))
    assert not [t for t in threading.enumerate() if t.name.startswith("edge-decode")]


_SIGTERM_MID_EVALUATE = """
import os, signal, sys, time
from edge import contract, runner

started = open({started!r}, "a", buffering=1)
real_load = contract.PixelContract.load_pixels

def slow_load(self, source, *args, **kwargs):
    started.write(str(source) + "\\n")
    time.sleep(0.3)  # every worker is busy decoding when the signal comes
    return real_load(self, source, *args, **kwargs)

contract.PixelContract.load_pixels = slow_load
real_scores, scored = runner.Runner.scores, []

def scores(self, *args, **kwargs):
    scored.append(1)
    if len(scored) == 3:
        os.kill(os.getpid(), signal.SIGTERM)
    return real_scores(self, *args, **kwargs)

runner.Runner.scores = scores
from edge.cli import main
main(["evaluate", {model!r}, "--data", {data!r}, "--out", {out!r}, "--workers", "3"])
"""


def test_sigterm_with_workers_decoding_ends_the_command_with_143_and_its_workers(classifier: Path, tmp_path: Path):
    data = _photos(tmp_path / "data", per_class=20, damaged=False)  # 60 images: 6 s of decoding on 3 workers
    started, out = tmp_path / "started.txt", tmp_path / "p.json"
    script = textwrap.dedent(_SIGTERM_MID_EVALUATE).format(started=str(started), model=str(classifier), data=str(data),
                                                            out=str(out))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # A worker left running would keep the process alive (the pool's threads are joined at exit): the timeout
    # catches that.
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                          start_new_session=True)
    assert done.returncode == 143, done.stderr
    assert "terminated (SIGTERM)" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()
    loads = started.read_text().splitlines()
    assert 3 <= len(loads) <= 3 + look_ahead(3) + 3  # nothing new was decoded after the stop


def test_detect_reads_a_stream_of_paths_from_stdin_with_the_answers_of_the_arguments(tmp_path: Path):
    from click.testing import CliRunner

    from edge.cli import main

    images = sorted((FIXTURES / "images").glob("*.png"))
    images.append(images[0])  # a frame path seen twice: drawn twice, the second file numbered
    given = run_edge("detect", DETECTOR, *images, "--workers", "1", "--threshold", "0", "--json", tmp_path / "given.json")
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart already
        runner = CliRunner()
    streamed = runner.invoke(main, ["detect", str(DETECTOR), "-", "--workers", "3", "--threshold", "0", "--json",
                                    str(tmp_path / "streamed.json"), "--out", str(tmp_path / "drawn")],
                             input="".join(f"{i}\n" for i in images))
    assert given.exit_code == streamed.exit_code == 0, streamed.stderr
    assert streamed.stdout == given.stdout and streamed.stdout.count("object(s)") == len(images)
    assert (tmp_path / "given.json").read_bytes() == (tmp_path / "streamed.json").read_bytes()
    assert len(list((tmp_path / "drawn").iterdir())) == len(images)


class _HeldWorker:
    """Jobs of one kind that hold a worker thread until the calling thread has run `needed` of them itself: a pipeline
    whose calling thread only waited would sit out the 10 s (`timed_out`)."""

    def __init__(self, needed: int):
        self.caller, self.needed = threading.current_thread().name, needed
        self.here: list = []
        self.released, self.timed_out = threading.Event(), False

    def __call__(self, i: int) -> None:
        if threading.current_thread().name != self.caller:
            if not self.released.wait(10):
                self.timed_out = True
        else:
            self.here.append(i)
            if len(self.here) >= self.needed:
                self.released.set()


@pytest.mark.parametrize("kind", ["load", "post"])
def test_the_calling_thread_runs_jobs_no_worker_has_started_instead_of_waiting(kind):
    held = _HeldWorker(needed=2)
    load = (lambda i: held(i) or i) if kind == "load" else (lambda i: i)
    post = (lambda i, v: held(i) or v * 10) if kind == "post" else (lambda i, v: v * 10)
    got = list(pipelined(range(12), load, run=lambda i, v: v + 1, post=post, workers=1, ahead=4, post_on_workers=True))
    assert [(i, v, e) for i, v, e in got] == [(i, (i + 1) * 10, None) for i in range(12)]  # the workers' answers, in order
    assert len(held.here) >= 2 and not held.timed_out


@pytest.mark.parametrize("workers", [1, 3])
def test_every_load_and_post_runs_once_wherever_it_runs(workers):
    runs: dict = {}

    def counted(stage):
        def job(i, *value):
            runs[(stage, i)] = runs.get((stage, i), 0) + 1
            time.sleep(0.001 * (i % 3))  # the workers fall behind now and then: the calling thread takes jobs over
            return value[0] if value else i
        return job

    got = list(pipelined(range(60), counted("load"), run=lambda i, v: v, post=counted("post"), workers=workers,
                         post_on_workers=True))
    assert [v for _, v, _ in got] == list(range(60))
    assert runs == {(stage, i): 1 for stage in ("load", "post") for i in range(60)}


def test_a_fed_stream_hands_back_what_arrived_without_waiting_for_the_next_item():
    more, answered = threading.Event(), []

    def stream():
        yield 0
        yield 1
        more.wait(10)  # a camera that has not saved its next frame yet
        yield 2

    for item, value, error in pipelined(stream(), lambda i: i, run=lambda i, v: v + 100, workers=2, feed=True):
        answered.append(value)
        if item == 1:
            assert not more.is_set()  # 0 and 1 answered while the stream still held back 2
            more.set()
    assert answered == [100, 101, 102]


def test_a_fed_stream_raises_its_readers_error_and_stops_its_thread():
    def stream():
        yield 0
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    with pytest.raises(UnicodeDecodeError):
        list(pipelined(stream(), lambda i: i, workers=2, feed=True))
    time.sleep(0.05)
    assert not [t for t in threading.enumerate() if t.name in ("edge-feed",) or t.name.startswith("edge-decode")]


def test_detect_answers_a_streamed_frame_before_the_next_path_arrives_and_sigterm_then_ends_it_with_143():
    image = sorted((FIXTURES / "images").glob("*.png"))[0]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen([sys.executable, "-m", "edge.cli", "detect", str(DETECTOR), "-", "--workers", "2"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        process.stdin.write(f"{image}\n")
        process.stdin.flush()
        lines: list = []
        reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)  # the frame's answer comes while standard input stays open, no next path given
        assert len(lines) == 1 and lines[0].startswith(f"{image}: ") and "object(s)" in lines[0]
        process.send_signal(signal.SIGTERM)  # the feeder thread is waiting on standard input
        _, errors = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143 and "terminated (SIGTERM)" in errors
    assert "Traceback" not in errors and "Fatal Python error" not in errors


def test_detect_files_takes_encoded_images_named_by_the_caller_as_pipeline_predict_gives_them():
    from edge.answers import detect as det

    images = sorted((FIXTURES / "images").glob("*.png"))
    detector = det.open_detector(DETECTOR, verify_sha256=False)
    by_path = list(det.detect_files(detector, images, 0.0, workers=1))
    encoded = [(i, f.read_bytes()) for i, f in enumerate(images)] + [(len(images), b"not an image")]
    by_bytes = list(det.detect_files(detector, encoded, 0.0, workers=3, source_of=lambda e: e[1],
                                     name_of=lambda e: f"input {e[0]}"))
    assert [done for _, done, _ in by_bytes[:-1]] == [done for _, done, _ in by_path]
    assert by_bytes[-1][1] is None and f"input {len(images)}" in str(by_bytes[-1][2])
