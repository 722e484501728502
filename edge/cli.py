"""The device command line: classify images, detect objects, evaluate a held-out set, time a model.

    edge classify RUN/model_int8_edgetpu.tflite cat.png dog.png --top-k 3
    edge detect RUN/model_int8.tflite street.jpg --threshold 0.4 --out annotated/ --json objects.json
    edge evaluate RUN/model_int8.tflite --data RUN/eval_bundle --out predictions.json
    edge bench RUN/model_int8.tflite --runs 100 --threads 2

Each command opens one edge.answers.runner.Runner (the model's sha256 checked against its sidecar or the run's
manifest.json when either is there, --no-verify skips that with a warning; its pixel contract, labels
and interpreter chosen and said on stderr), runs it, and prints. Errors print one line on stderr: exit 2
when the asked-for hardware (Edge TPU) is missing, 1 otherwise.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import click
import numpy as np

from edge.files.atomic import write_json_atomic
from edge.errors import EdgeError, InputError, exits_cleanly
from edge.answers.evaluation import (
    Tally,
    check_labels,
    data_folder,
    list_samples,
    prediction,
    predictions_document,
    source_of,
)
from edge.pixels.image_files import images_under
from edge.model.interpreter import CPU_ORDER
from edge.documents.latency import latency_document
from edge.answers.runner import Runner
from edge.answers.timing import end_to_end_rate, feed_seeded_input, invoke_seconds
from edge.files.workers import checked_workers

_fail_cleanly = exits_cleanly(EdgeError)


def _say(line: str) -> None:
    click.echo(line, err=True)


def _numbers(text: Optional[str], option: str) -> Optional[List[float]]:
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",")]
    except ValueError as err:
        raise InputError(f"{option} {text!r}, expected a number or three comma-separated numbers (R,G,B)") from err


def _open(model: str, edgetpu: bool, no_verify: bool, threads: Optional[int], labels_file: Optional[str] = None,
          mean: Optional[str] = None, std: Optional[str] = None, backend: Optional[str] = None) -> Runner:
    # --edgetpu requires the Edge TPU; without it, a compiled model still goes to the Edge TPU.
    return Runner.open(model, edgetpu=True if edgetpu else None, threads=threads, backend=backend, verify_sha256=not no_verify,
                       labels_file=labels_file, mean=_numbers(mean, "--input-mean"), std=_numbers(std, "--input-std"), say=_say)


BACKEND_OPTION = click.option(
    "--backend", default=None, metavar="NAME",
    help=f"Force the interpreter: {', '.join(CPU_ORDER)} (default: tflite_runtime for Edge TPU models, else the fastest installed).")


WORKERS_OPTION = click.option(
    "--workers", default=None, type=int, metavar="N",
    help="Threads that decode and resize the next images while the model runs (default: one per core this process may use; one fewer on the CPU interpreter, whose invoke takes a core).")


def _expand(images: Tuple[str, ...]) -> List[str]:
    """The IMAGES arguments with each folder replaced by every image under it (sorted), in the order given."""
    return [str(f) for arg in images for f in (images_under(arg, "folder") if Path(arg).is_dir() else [arg])]


def _running_options(command):
    """The options every command that runs a model on images shares."""
    for option in reversed((
        click.option("--labels", "labels_file", default=None, help="Labels file, one per line (default: the sidecar's or manifest's labels)."),
        click.option("--edgetpu", is_flag=True, help="Require the Edge TPU (exit 2 when it is missing)."),
        click.option("--no-verify", is_flag=True, help="Skip the sha256 check against the sidecar/manifest (prints a warning)."),
        click.option("--threads", default=None, type=click.IntRange(min=1), help="CPU threads for the interpreter."),
        BACKEND_OPTION,
        click.option("--input-mean", "mean", default=None,
                     help="For a model with no record or metadata: pixel mean, one number or R,G,B (default 128; "
                          "a float input with neither option gets raw pixels)."),
        click.option("--input-std", "std", default=None,
                     help="For a model with no record or metadata: pixel std, one number or R,G,B (default 128)."),
        WORKERS_OPTION,
    )):
        command = option(command)
    return command


@click.group()
def main() -> None:
    """Run a quantized TFLite image classifier on this device (no TensorFlow needed)."""


@main.command()
@click.argument("model")
@click.argument("images", nargs=-1, required=True)
@click.option("--top-k", "k", default=3, show_default=True, type=click.IntRange(min=1), help="How many classes to print per image.")
@_running_options
@_fail_cleanly
def classify(model: str, images: Tuple[str, ...], labels_file: Optional[str], k: int, edgetpu: bool, no_verify: bool,
             threads: Optional[int], backend: Optional[str], mean: Optional[str], std: Optional[str], workers: Optional[int]) -> None:
    """Print the top-k classes of each IMAGE (a folder: every image under it)."""
    checked_workers(workers)  # refused before the model opens; the default waits for its interpreter
    images = _expand(images)
    runner = _open(model, edgetpu, no_verify, threads, labels_file, mean, std, backend)
    failed = []
    for image_path, scores, error in runner.score_files(images, workers=workers):
        if error is not None:
            click.echo(f"error: {error}", err=True)
            failed.append(image_path)
            continue
        click.echo(f"{image_path}:")
        for c in runner.top_k(scores, k):
            click.echo(f"  {c.score:.4f}  {c.label}  (id {c.id})")
    if failed:
        raise InputError(f"{len(failed)} of {len(images)} images could not be read ({', '.join(failed)}, each named above); "
                         "the others are classified")


def _annotated_names(out: Path, images: Tuple[str, ...]) -> dict:
    """image -> the annotated PNG it becomes in `out`: its stem, numbered when two images share one."""
    targets, taken = {}, set()
    for image_path in images:
        targets[image_path] = _annotated_name(out, image_path, taken)
    return targets


def _annotated_name(out: Path, image_path: str, taken: set) -> Path:
    stem = Path(image_path).stem
    target, n = out / f"{stem}.png", 1
    while target in taken:  # two images of one name from different folders: neither is lost
        target, n = out / f"{stem}_{n}.png", n + 1
    taken.add(target)
    return target


def _stdin_images() -> Iterator[str]:
    """Image paths from standard input, one a line, each as it arrives (blank lines skipped)."""
    for line in sys.stdin:
        if line.strip():
            yield line.rstrip("\r\n")


@main.command()
@click.argument("model")
@click.argument("images", nargs=-1, required=True)
@click.option("--threshold", default=0.4, show_default=True, type=click.FloatRange(0.0, 1.0),
              help="Report objects scoring at least this (pycoral's detect_image.py and Frigate use 0.4).")
@click.option("--out", "out_dir", default=None, metavar="DIR", help="Write each image with its boxes drawn to DIR (PNG).")
@click.option("--json", "json_out", default=None, metavar="FILE",
              help="Also write the objects to FILE as JSON (label, id, score, box as xmin, ymin, xmax, ymax in pixels).")
@click.option("--overwrite", is_flag=True, help="Replace files already in --out DIR and --json FILE (never an input image).")
@_running_options
@_fail_cleanly
def detect(model: str, images: Tuple[str, ...], threshold: float, out_dir: Optional[str], json_out: Optional[str],
           overwrite: bool, labels_file: Optional[str], edgetpu: bool, no_verify: bool, threads: Optional[int],
           backend: Optional[str], mean: Optional[str], std: Optional[str], workers: Optional[int]) -> None:
    """Print the objects a detector finds in each IMAGE (a folder: every image under it; `-`: the image paths read
    from standard input one a line, each detected as it arrives, e.g. frames a camera saves): label, score, box in the
    image's pixels. A pose model's objects carry their keypoints too: in --json as [x, y, score] in the image's pixels,
    and drawn in --out."""
    from edge.answers import detect as det
    from edge.files.outputs import check_output

    checked_workers(workers)  # refused before the model opens; the default waits for its interpreter
    stream = images == ("-",)
    images = _stdin_images() if stream else _expand(images)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None and out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; expected a folder for the annotated images")
    if stream:  # each image's file is checked as its path arrives; one that may not be written is that image's error
        images = _checked_stream(images, out, overwrite)
        annotated = (lambda frame: frame.target) if out is not None else None
    else:
        targets = _annotated_names(out, images) if out is not None else {}
        for target in targets.values():  # before any work: no input overwritten, nothing existing replaced unasked
            check_output(target, overwrite, "--out", inputs=[Path(i) for i in images])
        annotated = targets.__getitem__ if out is not None else None
    if json_out:
        check_output(Path(json_out), overwrite, "--json", inputs=[] if stream else [Path(i) for i in images])
    detector = det.open_detector(model, edgetpu=True if edgetpu else None, threads=threads, backend=backend,
                                 verify_sha256=not no_verify, labels_file=labels_file, mean=_numbers(mean, "--input-mean"),
                                 std=_numbers(std, "--input-std"), say=_say)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    results, failed = [], []
    # Decoding, reading the objects and drawing them run on the workers; this thread invokes and prints, in order.
    # Standard input is read on a thread of its own: a frame is answered without waiting for the next one's path.
    for image_path, done, error in det.detect_files(detector, images, threshold, workers, annotated, feed=stream):
        if error is None and stream and image_path.refused is not None:
            error = image_path.refused
        if error is not None:
            click.echo(f"error: {error}", err=True)
            failed.append({"image": image_path, "error": str(error)})
            continue
        found, size = done
        click.echo(f"{image_path}: {len(found)} object(s)")
        for obj in found:
            b = obj.box
            click.echo(f"  {obj.label:<16} {obj.score:.3f}  xmin {b.xmin:.0f} ymin {b.ymin:.0f} xmax {b.xmax:.0f} ymax {b.ymax:.0f}  (id {obj.id})")
        results.append({"image": image_path, "width": size[0], "height": size[1], "objects": [det.as_record(o) for o in found]})
    if json_out:
        write_json_atomic(Path(json_out), {"model": Path(model).name, "sha256": detector.runner.sha256, "threshold": threshold,
                                           "images": results, "errors": failed}, indent=1)
    if failed:
        total = len(results) + len(failed)
        raise InputError(f"{len(failed)} of {total} images could not be read (each named above); the others are reported")


class _Frame(str):
    """A streamed image path with its own annotated file (or None) and, when that file may not be written, the error:
    a path seen twice is two frames, each drawn to its own file."""

    target: Optional[Path] = None
    refused: Optional[InputError] = None


def _checked_stream(images, out: Optional[Path], overwrite: bool):
    """The streamed paths as frames, each one's annotated file named and checked as it arrives: a file that may not be
    written makes that image's error (nothing drawn for it, its objects not reported)."""
    from edge.files.outputs import check_output

    taken: set = set()
    for image_path in images:
        frame = _Frame(image_path)
        if out is not None:
            target = _annotated_name(out, image_path, taken)
            try:
                frame.target = check_output(target, overwrite, "--out", inputs=[Path(image_path)])
            except InputError as err:
                frame.refused = err
        yield frame


@main.command()
@click.argument("model")
@click.option("--data", "data_dir", required=True, help="A folder of class sub-folders, or an evaluation bundle (a folder with bundle.json).")
@click.option("--out", "out", required=True, help="Where to write the predictions JSON.")
@click.option("--top-k", "k", default=1, show_default=True, type=click.IntRange(min=1), help="Also report top-k accuracy for this k.")
@_running_options
@_fail_cleanly
def evaluate(model: str, data_dir: str, out: str, labels_file: Optional[str], k: int, edgetpu: bool, no_verify: bool,
             threads: Optional[int], backend: Optional[str], mean: Optional[str], std: Optional[str], workers: Optional[int]) -> None:
    """Score every image under --data and write all scores to --out."""
    checked_workers(workers)  # refused before the model opens; the default waits for its interpreter
    data = data_folder(Path(data_dir))
    runner = _open(model, edgetpu, no_verify, threads, labels_file, mean, std, backend)
    from edge.answers import detect as det

    if det.is_detector(runner.interpreter):  # objects per image, not scores: the host scores them against its boxes
        _evaluate_detector(Path(model), runner, data, out, workers)
        return
    samples, labels = list_samples(data, runner.labels)
    check_labels(labels, runner.num_classes)
    predictions, errors, tally = [], [], Tally(k)
    # On a terminal the bar is drawn at most about 100 times, not once per image (a terminal write each).
    with click.progressbar(runner.score_files(samples, source_of, lambda s: str(s.path), workers=workers), length=len(samples),
                           label="evaluating",
                           file=sys.stderr, update_min_steps=max(1, len(samples) // 100)) as bar:
        for sample, scores, error in bar:
            if error is not None:
                errors.append({"file": sample.rel, "id": sample.id, "error": str(error)})
                continue
            predictions.append(prediction(sample, scores))
            tally.add(sample.label, scores)
    write_json_atomic(Path(out), predictions_document(Path(model), runner, labels, predictions, tally, errors), indent=1)
    click.echo(f"{len(predictions)} images, {tally.summary()}; wrote {out}")
    _refuse_unreadable(errors, len(samples), out, "scored")


def _evaluate_detector(model: Path, runner: Runner, data: Path, out: str, workers: int) -> None:
    from edge.answers import detect as det
    from edge.answers.evaluation import detection_samples, detections_document, evaluate_detections, task_of
    from edge.documents.predictions import write_detections

    detector = det.Detector(runner, det.output_indices(runner.interpreter))
    samples, labels = detection_samples(data, runner.labels)
    bar = click.progressbar(length=len(samples), label="evaluating", file=sys.stderr, update_min_steps=max(1, len(samples) // 100))

    def progress(items):
        with bar:
            for item in items:
                yield item
                bar.update(1)

    # Each entry read, kept and written as JSON on the workers: this thread sets inputs, invokes and copies outputs.
    entries, errors = evaluate_detections(detector, samples, progress, workers, post_on_workers=True, encoded=True)
    write_detections(Path(out), detections_document(model, detector, labels, entries, errors))
    found = sum(e.objects for e in entries)
    what = "poses (objects with keypoints; " if task_of(detector) == "pose" else "detections ("
    click.echo(f"{len(entries)} images, {found} {what}every score; mAP is scored on the host); wrote {out}")
    _refuse_unreadable(errors, len(samples), out, "evaluated")


def _refuse_unreadable(errors, total: int, out: str, done: str) -> None:
    """Name each image that could not be read, then exit 1 with the count: the others' results are in `out`."""
    if not errors:
        return
    for entry in errors:
        click.echo(f"error: {entry['error']}", err=True)
    raise InputError(f"{len(errors)} of {total} images could not be read (each named above, and under \"errors\" in {out}); "
                     f"the others are {done}")


@main.command()
@click.argument("model")
@click.option("--runs", default=50, show_default=True, type=click.IntRange(min=1), help="Steady-state invocations to time.")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="CPU threads for the interpreter.")
@click.option("--edgetpu", is_flag=True, help="Require the Edge TPU (exit 2 when it is missing).")
@click.option("--no-verify", is_flag=True, help="Skip the sha256 check against the sidecar/manifest (prints a warning).")
@BACKEND_OPTION
@click.option("--images", "images_dir", default=None, metavar="DIR",
              help="Also time the whole path (decode, resize, invoke, scores) over every image under DIR, in images/s.")
@click.option("--json", "json_out", default=None, metavar="FILE", help="Also write the timings to FILE as JSON (for `pipeline report RUN --latency FILE`).")
@_fail_cleanly
def bench(model: str, runs: int, threads: Optional[int], edgetpu: bool, no_verify: bool, backend: Optional[str],
          images_dir: Optional[str], json_out: Optional[str]) -> None:
    """Time the first invoke (load included) apart from the steady state (median, p90); with --images, end to end too."""
    files = images_under(images_dir, "--images") if images_dir is not None else []
    start = time.perf_counter()
    runner = _open(model, edgetpu, no_verify, threads, backend=backend)
    feed_seeded_input(runner.interpreter)
    first = time.perf_counter() - start
    ms = [t * 1000 for t in invoke_seconds(runner.interpreter, runs)]
    median = statistics.median(ms)
    click.echo(f"model {Path(model).name}  backend {runner.loaded.backend}  edgetpu {runner.loaded.edgetpu}  threads {threads or 'default'}")
    click.echo(f"first invoke (load + first run): {first * 1000:.2f} ms")
    click.echo(f"steady state over {runs} runs: median {median:.3f} ms, p90 {float(np.percentile(ms, 90)):.3f} ms"
               f" ({1000 / median:.1f} invokes/s)")
    from edge.answers import detect as det

    if det.is_detector(runner.interpreter):  # the post-processing op is inside the invoke; the reading after it here
        detector = det.Detector(runner, det.output_indices(runner.interpreter))
        reading = statistics.median(det.reading_seconds(detector, runs)) * 1000
        click.echo(f"reading the detections after the invoke (outputs, threshold, scaling): median {reading:.3f} ms")
        rate = det.end_to_end_rate(detector, files) if files else None
        what = "invoke, objects"
    else:
        rate = end_to_end_rate(runner, files) if files else None
        what = "invoke, scores"
    if files:
        click.echo(f"end to end over {len(files)} images (decode + resize ahead on the default workers, {runner.workers(None)}, {what}): {rate:.1f} images/s, "
                   f"{rate / (1000 / median):.2f} of the bare invoke rate")
    if json_out:
        write_json_atomic(Path(json_out), latency_document(
            Path(model).name, runner.sha256, runner.loaded.backend, runner.loaded.edgetpu, threads, runs, first * 1000, median,
            float(np.percentile(ms, 90)), len(files), rate))


if __name__ == "__main__":
    main()
