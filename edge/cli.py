"""The device command line: classify images, evaluate a held-out set, time a model.

    edge classify RUN/model_int8_edgetpu.tflite cat.png dog.png --top-k 3
    edge evaluate RUN/model_int8.tflite --data RUN/eval_bundle --out predictions.json
    edge bench RUN/model_int8.tflite --runs 100 --threads 2

Before loading, the model's sha256 is checked against its sidecar (`<model>.json`) or the run's
manifest.json when either is there (--no-verify skips that, with a warning). Errors print one
line on stderr: exit 2 when the asked-for hardware (Edge TPU) is missing, 1 otherwise.
"""
from __future__ import annotations

import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

import click
import numpy as np

from edge.atomic import write_json_atomic
from edge.classify import get_scores, input_details, input_size, set_input, top_k
from edge.errors import EdgeError, InputError, IntegrityError, ModelLoadError
from edge.image_files import IMAGE_SUFFIXES, is_image_file
from edge.integrity import (ModelRecord, check_agreement, find_records, load_record, metadata_record, recorded_labels,
                            sha256_bytes, sidecar_path, verify)
from edge.interpreter import CPU_ORDER, LoadedModel, open_model
from edge.labels import choose_labels
from edge.model_metadata import read_metadata
from edge.prefetch import prefetch
from edge.preprocess import (PYCORAL_DEFAULT, Normalization, decode_scaled, describe, load_pixels, normalization,
                             normalization_from_contract)

BUNDLE_NAME = "bundle.json"


def _fail_cleanly(fn):
    """Turn an EdgeError into one line on stderr and its exit code: no traceback for bad input."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except EdgeError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(err.exit_code)

    return wrapper


def _invoke(interpreter: Any, what: str) -> None:
    """invoke(), with the interpreter's own errors (a model that loads but cannot run) as one clean line."""
    try:
        interpreter.invoke()
    except (RuntimeError, ValueError) as err:
        raise ModelLoadError(f"the interpreter failed on {what}: {str(err).strip()}") from err


class Opened(NamedTuple):
    model: LoadedModel
    sha256: str
    norm: Normalization  # how pixels become this model's input (the pixel contract's last step)
    scaled: bool  # JPEGs decoded at reduced scale (contract version 2 on), as the model was trained
    labels: Optional[List[str]]  # class names, None = print class ids


def _normalization(recorded: Optional[ModelRecord], records: List[ModelRecord], data: bytes, mean: Optional[str],
                   std: Optional[str]) -> Normalization:
    """The model's recorded contract, else its TFLite metadata, else --input-mean/--input-std (pycoral's 128, 128)."""
    if records and recorded is None:
        raise InputError(f"{records[0].source} vouches for this model but records no pixel contract (it was written by an "
                         "earlier edgeflow); export the model again, so the device knows how to feed it")
    if recorded is not None:
        if mean is not None or std is not None:
            raise InputError(f"--input-mean/--input-std do not apply: {recorded.source} records this model's pixel contract")
        return normalization_from_contract(recorded.preprocessing, str(recorded.source))
    if mean is not None or std is not None:
        return normalization(_numbers(mean, "--input-mean", PYCORAL_DEFAULT.mean), _numbers(std, "--input-std", PYCORAL_DEFAULT.std),
                             "--input-mean/--input-std")
    meta = read_metadata(data)
    if meta.mean is not None and meta.std is not None:
        return normalization(meta.mean, meta.std, "the model's TFLite metadata")
    return PYCORAL_DEFAULT


def _numbers(text: Optional[str], option: str, default: Sequence[float]) -> List[float]:
    if text is None:
        return list(default)
    try:
        return [float(x) for x in text.split(",")]
    except ValueError as err:
        raise InputError(f"{option} {text!r}, expected a number or three comma-separated numbers (R,G,B)") from err


def _open(model: str, edgetpu: bool, no_verify: bool, threads: Optional[int], labels_file: Optional[str] = None,
          mean: Optional[str] = None, std: Optional[str] = None, backend: Optional[str] = None) -> Opened:
    path = Path(model)
    if not path.is_file():
        raise InputError(f"model {path} not found, expected a .tflite file")
    data = path.read_bytes()
    if no_verify:
        click.echo(f"WARNING: --no-verify: the sha256 of {path} is NOT checked; this device may run a model that did not pass parity", err=True)
        try:
            records = find_records(path)
        except IntegrityError:
            records = []
        sha = sha256_bytes(data)
    else:
        records = find_records(path)
        if not records:
            click.echo(f"note: no {sidecar_path(path).name} or manifest.json next to {path}; its sha256 is not checked", err=True)
        sha = verify(path, data, records)
    # --edgetpu requires the Edge TPU; without it, a compiled model still goes to the Edge TPU.
    loaded = open_model(path, edgetpu=True if edgetpu else None, threads=threads, data=data, backend=backend)
    click.echo(f"interpreter: {loaded.backend} ({loaded.why})", err=True)
    embedded = metadata_record(path, data)  # the model's own record (pipeline exports carry one in their metadata)
    check_agreement(records, embedded)
    recorded = next((r for r in records if r.preprocessing is not None), embedded)  # the record holding the contract
    norm = _normalization(recorded, records, data, mean, std)
    scaled = decode_scaled(recorded.preprocessing if recorded is not None else None)
    labels, labels_from = choose_labels(labels_file, recorded_labels(records), data)
    # Say how pixels and class names were chosen: a wrong guess here is the usual cause of noise.
    click.echo(describe(norm, input_details(loaded.interpreter)), err=True)
    click.echo("decode: JPEGs at reduced scale (the recorded pixel contract)" if scaled else
               "decode: JPEGs at full size (" + ("pixel contract version 1)" if records else "no recorded pixel contract)"), err=True)
    click.echo(labels_from, err=True)
    return Opened(loaded, sha, norm, scaled, labels)


BACKEND_OPTION = click.option(
    "--backend", default=None, metavar="NAME",
    help=f"Force the interpreter: {', '.join(CPU_ORDER)} (default: tflite_runtime for Edge TPU models, else the fastest installed).")


def _running_options(command):
    """The options every command that runs a model on images shares."""
    for option in reversed((
        click.option("--labels", "labels_file", default=None, help="Labels file, one per line (default: the sidecar's or manifest's labels)."),
        click.option("--edgetpu", is_flag=True, help="Require the Edge TPU (exit 2 when it is missing)."),
        click.option("--no-verify", is_flag=True, help="Skip the sha256 check against the sidecar/manifest (prints a warning)."),
        click.option("--threads", default=None, type=click.IntRange(min=1), help="CPU threads for the interpreter."),
        BACKEND_OPTION,
        click.option("--input-mean", "mean", default=None,
                     help="For a model with no record or metadata: pixel mean, one number or R,G,B (default 128)."),
        click.option("--input-std", "std", default=None,
                     help="For a model with no record or metadata: pixel std, one number or R,G,B (default 128)."),
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
             threads: Optional[int], backend: Optional[str], mean: Optional[str], std: Optional[str]) -> None:
    """Print the top-k classes of each IMAGE."""
    opened = _open(model, edgetpu, no_verify, threads, labels_file, mean, std, backend)
    labels = opened.labels
    interpreter = opened.model.interpreter
    failed = []
    for image_path, pixels, error in prefetch(images, _pixel_loader(opened, lambda path: path)):
        if error is not None:
            click.echo(f"error: {error}", err=True)
            failed.append(image_path)
            continue
        set_input(interpreter, pixels, opened.norm)
        _invoke(interpreter, image_path)
        click.echo(f"{image_path}:")
        for c in top_k(get_scores(interpreter), k=k, labels=labels):
            click.echo(f"  {c.score:.4f}  {c.label}  (id {c.id})")
    if failed:
        raise InputError(f"{len(failed)} of {len(images)} images could not be read ({', '.join(failed)}, each named above); "
                         "the others are classified")


def _pixel_loader(opened: Opened, path_of: Callable[[Any], Any]) -> Callable[[Any], np.ndarray]:
    """What the decode worker runs per item: the pixel contract's pixels at the model's input size."""
    size = input_size(opened.model.interpreter)
    return lambda item: load_pixels(path_of(item), size, name=str(path_of(item)), scaled=opened.scaled)


class Sample(NamedTuple):
    path: Path  # the image file
    rel: str  # its path relative to the data directory, as written to predictions
    label: Optional[int]  # class index, None when unknown
    id: Optional[str] = None  # the example's identity in the run's data (bundles carry it), for parity to match


def _folder_samples(data: Path, labels: Optional[List[str]]) -> Tuple[List[Sample], List[str]]:
    classes = sorted(p.name for p in data.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise InputError(f"{data} has neither {BUNDLE_NAME} nor class sub-folders, expected one of them")
    if labels is None:
        labels = classes
    unknown = [c for c in classes if c not in labels]
    if unknown:
        raise InputError(f"folders {unknown} in {data} are not among the model's labels {labels}")
    samples = []
    for name in classes:
        for f in sorted((data / name).iterdir()):
            if is_image_file(f):
                samples.append(Sample(f, f.relative_to(data).as_posix(), labels.index(name)))
    return samples, labels


def _bundle_samples(data: Path, labels: Optional[List[str]]) -> Tuple[List[Sample], List[str]]:
    path = data / BUNDLE_NAME
    bundle = load_record(path, "evaluation bundle", InputError)
    bundle_labels = [str(x) for x in bundle.get("labels") or []]
    if labels is not None and bundle_labels and labels != bundle_labels:
        raise InputError(f"{path} labels {bundle_labels} differ from the model's labels {labels}; expected the same classes in the same order")
    labels = labels if labels is not None else bundle_labels or None
    samples = []
    for i, entry in enumerate(bundle.get("images") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise InputError(f"{path} images[{i}] is {entry!r}, expected {{\"file\": ..., \"label\": ...}}")
        label = entry.get("label")
        if label is not None and not (isinstance(label, int) and (labels is None or 0 <= label < len(labels))):
            raise InputError(f"{path} images[{i}] has label {label!r}, expected a class index below {len(labels or [])} or null")
        samples.append(Sample(data / entry["file"], entry["file"], label, entry.get("id")))
    if not samples:
        raise InputError(f"{path} lists no images")
    return samples, labels


@main.command()
@click.argument("model")
@click.option("--data", "data_dir", required=True, help="A folder of class sub-folders, or an evaluation bundle (a folder with bundle.json).")
@click.option("--out", "out", required=True, help="Where to write the predictions JSON.")
@click.option("--top-k", "k", default=1, show_default=True, type=click.IntRange(min=1), help="Also report top-k accuracy for this k.")
@_running_options
@_fail_cleanly
def evaluate(model: str, data_dir: str, out: str, labels_file: Optional[str], k: int, edgetpu: bool, no_verify: bool,
             threads: Optional[int], backend: Optional[str], mean: Optional[str], std: Optional[str]) -> None:
    """Score every image under --data and write all scores to --out."""
    data = Path(data_dir)
    if not data.is_dir():
        raise InputError(f"--data {data} is not a directory, expected class folders or an evaluation bundle")
    opened = _open(model, edgetpu, no_verify, threads, labels_file, mean, std, backend)
    labels = opened.labels
    samples, labels = (_bundle_samples if (data / BUNDLE_NAME).is_file() else _folder_samples)(data, labels)
    interpreter = opened.model.interpreter
    predictions = []
    correct = correct_k = labelled = 0
    errors = []
    loader = _pixel_loader(opened, lambda sample: sample.path)
    with click.progressbar(prefetch(samples, loader), length=len(samples), label="evaluating", file=sys.stderr) as bar:
        for sample, pixels, error in bar:
            if error is not None:
                errors.append({"file": sample.rel, "id": sample.id, "error": str(error)})
                continue
            set_input(interpreter, pixels, opened.norm)
            _invoke(interpreter, sample.rel)
            scores = get_scores(interpreter)
            if labels is not None and len(labels) != scores.size:
                raise InputError(f"model gives {scores.size} scores, expected {len(labels)} (one per label)")
            predictions.append({"file": sample.rel, "id": sample.id, "label": sample.label, "scores": [float(s) for s in scores]})
            if sample.label is not None:
                labelled += 1
                best = [c.id for c in top_k(scores, k=k)]
                correct += int(best[0] == sample.label)
                correct_k += int(sample.label in best)
    result = {
        "schema_version": 1,
        "model": Path(model).name,
        "model_sha256": opened.sha256,
        "backend": opened.model.backend,
        "edgetpu": opened.model.edgetpu,
        "labels": labels,
        "predictions": predictions,
        "top1_accuracy": correct / labelled if labelled else None,
        "top_k": k,
        "top_k_accuracy": correct_k / labelled if labelled else None,
    }
    if errors:  # the files left out of predictions, each with why: parity refuses a short list, naming the count
        result["errors"] = errors
    write_json_atomic(Path(out), result, indent=1)
    accuracy = "n/a (no labels)" if not labelled else f"{correct / labelled:.4f}"
    click.echo(f"{len(predictions)} images, top-1 accuracy {accuracy}" + (f", top-{k} {correct_k / labelled:.4f}" if labelled and k > 1 else "") + f"; wrote {out}")
    if errors:
        for entry in errors:
            click.echo(f"error: {entry['error']}", err=True)
        raise InputError(f"{len(errors)} of {len(samples)} images could not be read (each named above, and under \"errors\" in {out}); "
                         "the others are scored")


def _percentile(values: List[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


@main.command()
@click.argument("model")
@click.option("--runs", default=50, show_default=True, type=click.IntRange(min=1), help="Steady-state invocations to time.")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="CPU threads for the interpreter.")
@click.option("--edgetpu", is_flag=True, help="Require the Edge TPU (exit 2 when it is missing).")
@click.option("--no-verify", is_flag=True, help="Skip the sha256 check against the sidecar/manifest (prints a warning).")
@BACKEND_OPTION
@click.option("--images", "images_dir", default=None, metavar="DIR",
              help="Also time the whole path (decode, resize, invoke, scores) over every image under DIR, in images/s.")
@_fail_cleanly
def bench(model: str, runs: int, threads: Optional[int], edgetpu: bool, no_verify: bool, backend: Optional[str],
          images_dir: Optional[str]) -> None:
    """Time the first invoke (load included) apart from the steady state (median, p90); with --images, end to end too."""
    files = _bench_images(Path(images_dir)) if images_dir is not None else []
    start = time.perf_counter()
    opened = _open(model, edgetpu, no_verify, threads, backend=backend)
    interpreter = opened.model.interpreter
    details = interpreter.get_input_details()[0]
    # A fixed seeded input: latency does not depend on pixel values, and runs stay comparable.
    rng = np.random.default_rng(0)
    dtype = np.dtype(details["dtype"])
    if dtype.kind == "f":
        sample = rng.uniform(0, 255, size=details["shape"]).astype(dtype)
    else:
        info = np.iinfo(dtype)
        sample = rng.integers(info.min, info.max, size=details["shape"], endpoint=True).astype(dtype)
    interpreter.set_tensor(details["index"], sample)
    _invoke(interpreter, "a seeded random input")
    first = time.perf_counter() - start
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - t0)
    ms = [t * 1000 for t in times]
    click.echo(f"model {Path(model).name}  backend {opened.model.backend}  edgetpu {opened.model.edgetpu}  threads {threads or 'default'}")
    click.echo(f"first invoke (load + first run): {first * 1000:.2f} ms")
    click.echo(f"steady state over {runs} runs: median {statistics.median(ms):.3f} ms, p90 {_percentile(ms, 90):.3f} ms"
               f" ({1000 / statistics.median(ms):.1f} invokes/s)")
    if files:
        rate = end_to_end_rate(opened, files)
        click.echo(f"end to end over {len(files)} images (decode + resize ahead on a worker, invoke, scores): {rate:.1f} images/s, "
                   f"{rate / (1000 / statistics.median(ms)):.2f} of the bare invoke rate")


def _bench_images(folder: Path) -> List[Path]:
    if not folder.is_dir():
        raise InputError(f"--images {folder} is not a directory, expected a folder of images")
    files = sorted(f for f in folder.rglob("*") if is_image_file(f))
    if not files:
        raise InputError(f"--images {folder} holds no images, expected files ending in {', '.join(IMAGE_SUFFIXES)}")
    return files


def end_to_end_rate(opened: Opened, files: Sequence[Path]) -> float:
    """Images per second through what `edge evaluate` does per image: prefetched decode and resize, set_input,
    invoke, get_scores. A file that cannot be read is an error here: a benchmark must not skip work."""
    interpreter = opened.model.interpreter
    start = time.perf_counter()
    for path, pixels, error in prefetch(files, _pixel_loader(opened, lambda f: f)):
        if error is not None:
            raise error
        set_input(interpreter, pixels, opened.norm)
        _invoke(interpreter, str(path))
        get_scores(interpreter)
    return len(files) / (time.perf_counter() - start)


if __name__ == "__main__":
    main()
