"""Object detection on the device, TensorFlow-free: run a detector and read its answers as its head's reader does
(edge/answers/heads/: the post-processing op's four outputs, or an anchor-free head's two decoded on the host), in
pycoral's manner (free functions over an interpreter, NamedTuple results).

    from edge.answers.detect import open_detector, detect_file
    detector = open_detector("model_int8.tflite")                       # checks, interpreter, contract, labels
    for obj in detect_file(detector, "street.jpg", threshold=0.4):
        print(obj.label, obj.score, obj.box)                             # box in the image's pixels
    for path, done, error in detect_files(detector, paths):    # many, decoded and read on worker threads:
        ...                                                     # done (objects, (width, height)), or error

The op's outputs are read as pycoral reads them: by the signature's names when the model has one (output_0 count,
output_1 scores, output_2 class ids, output_3 boxes), else by position (boxes, class ids, scores, count), each
checked against the op's shapes (edge/answers/heads/ssd.py). Boxes come normalized to the input (ymin, xmin, ymax, xmax). The pixel contract
stretches the whole image to the input (edge.pixels.contract's crop "stretch"), so a normalized box times the image's
width and height is the box in the image's own pixels.
"""
from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from edge.answers import heads
from edge.answers.heads.raw import Raw
from edge.files.atomic import write_bytes_atomic
from edge.answers.classify import invoke
from edge.errors import InputError, ModelCheckError
from edge.model.integrity import recorded_labels
from edge.model.labels import choose_labels, parse_labels
from edge.pixels.preprocess import decode_error
from edge.answers.runner import Kind, Runner, Say, quiet

DEFAULT_THRESHOLD = 0.4  # pycoral's detect_image.py and Frigate's default


class Box(NamedTuple):
    """A box in pixels (or normalized, before scaling), pycoral's BBox order."""

    xmin: float
    ymin: float
    xmax: float
    ymax: float


class Object(NamedTuple):
    id: int  # 0-based class id
    label: str  # the class name, or the id as text when the model names none
    score: float
    box: Box
    keypoints: Optional[List[Tuple[float, float, float]]] = None  # a pose model's: (x, y, score) per keypoint, as the box


def output_indices(interpreter: Any) -> Any:
    """Where the model's outputs are, as its head's reader finds them (edge/answers/heads/): the op's four (boxes, class
    ids, scores, count) by the signature's names, else by position, checked by shape; an anchor-free head's two, its
    Layout, which get_raw decodes."""
    return heads.layout(interpreter)


def get_raw(interpreter: Any, indices: Optional[Any] = None) -> Raw:
    """The four outputs after invoke (copies: the next invoke overwrites the interpreter's buffers)."""
    indices = output_indices(interpreter) if indices is None else indices
    return raw_of(read_outputs(interpreter, indices), indices)


def read_outputs(interpreter: Any, indices: Any) -> Any:
    """Right after an invoke, the little that must be read before the next one (copies): the op's outputs as a Raw, or
    an anchor-free head's two tensors as stored, which `raw_of` decodes later (a worker can: its decode and NMS in numpy
    need no interpreter)."""
    return indices.read(interpreter)


def raw_of(outputs: Any, indices: Any) -> Raw:
    """The Raw of what `read_outputs` read: an anchor-free head's decoded on the host here, the op's as they are."""
    return indices.raw(outputs)


class Kept(NamedTuple):
    """The detections scoring at least a threshold, as arrays in the op's order (highest score first)."""

    ids: np.ndarray  # [K] int64 0-based class ids
    scores: np.ndarray  # [K] float32
    boxes: np.ndarray  # [K, 4] float32 ymin, xmin, ymax, xmax normalized to the input, clipped to 0..1


def kept(raw: Raw, threshold: float = DEFAULT_THRESHOLD) -> Kept:
    """The detections of `raw` scoring at least `threshold`, whole arrays at once (no Python work per detection)."""
    keep = raw.scores >= threshold
    # rint rounds halves to even, as Python's round does: the ids match what a per-object int(round(c)) gave.
    return Kept(np.rint(raw.classes[keep]).astype(np.int64), raw.scores[keep], np.clip(raw.boxes[keep], 0.0, 1.0))


def objects(raw: Raw, size: Tuple[int, int], threshold: float = DEFAULT_THRESHOLD,
            labels: Optional[Sequence[str]] = None) -> List[Object]:
    """The detections scoring at least `threshold`, boxes clipped to the input and scaled to `size` (width, height)."""
    width, height = size
    found = kept(raw, threshold)
    # Scaled in float64, as float(v) * width was: the same numbers, computed for all boxes at once.
    boxes = (found.boxes.astype(np.float64) * (height, width, height, width)).tolist()
    ids = found.ids.tolist()
    names = [labels[i] if labels is not None and 0 <= i < len(labels) else str(i) for i in ids]
    points = [None] * len(ids)
    if raw.keypoints is not None:  # a pose model's, clipped to the input and scaled as the boxes
        chosen = raw.keypoints[raw.scores >= threshold].astype(np.float64)
        chosen[..., :2] = np.clip(chosen[..., :2], 0.0, 1.0)
        points = [[tuple(p) for p in kp] for kp in (chosen * (width, height, 1.0)).tolist()]
    return [Object(i, name, score, Box(xmin, ymin, xmax, ymax), kp)
            for i, name, score, (ymin, xmin, ymax, xmax), kp in zip(ids, names, found.scores.tolist(), boxes, points)]


def image_size(source: Union[str, Path, bytes, np.ndarray], name: Optional[str] = None) -> Tuple[int, int]:
    """(width, height) of an image as stored (what its boxes are measured in), from the header only."""
    if isinstance(source, np.ndarray):
        return int(source.shape[1]), int(source.shape[0])
    from PIL import Image, UnidentifiedImageError

    name = name or (str(source) if not isinstance(source, bytes) else "image bytes")
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            return image.size
    except FileNotFoundError as err:
        raise InputError(f"image {name} not found") from err
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise InputError(f"cannot read image {name}: {decode_error(err)}; expected a complete PNG, JPEG, BMP or GIF file") from err


class Detector(NamedTuple):
    runner: Runner  # the opened model: interpreter, pixel contract, labels, sha256
    indices: Any  # where its outputs are: its head's layout (edge/answers/heads/), read_outputs and raw_of read by it


def open_detector(model: Union[str, Path], *, edgetpu: Optional[bool] = None, threads: Optional[int] = None,
                  backend: Optional[str] = None, verify_sha256: bool = True, labels_file: Optional[Union[str, Path]] = None,
                  mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None, say: Say = quiet) -> Detector:
    """Open a detector by the device's one policy (edge.answers.runner's Runner.open with DETECTOR): sha256, interpreter, the
    outputs checked, pixel contract; labels from --labels, the record, else the label file packed on the class-id
    output (TENSOR_VALUE_LABELS, as Google's detectors carry)."""
    runner = Runner.open(model, edgetpu=edgetpu, threads=threads, backend=backend, verify_sha256=verify_sha256,
                         labels_file=labels_file, mean=mean, std=std, say=say, kind=DETECTOR)
    return Detector(runner, runner.outputs)


def _detector_labels(labels_file, records, embedded, data, meta, name) -> Tuple[Optional[List[str]], str]:
    """--labels, else the recorded labels (a sidecar's or manifest's, else the model's own record), else the packed
    TENSOR_VALUE_LABELS file."""
    labels, labels_from = choose_labels(labels_file, recorded_labels(records) or (embedded.labels if embedded else None))
    if labels is None:
        labels = value_labels(data, name)
        if labels:
            labels_from = "labels: the label file packed on the model's class-id output"
    return labels, labels_from


DETECTOR = Kind(output_indices, _detector_labels)  # Runner.open's kind for a model ending in the post-processing op


def value_labels(data: bytes, name: str = "model") -> Optional[List[str]]:
    """The class names of the first TENSOR_VALUE_LABELS file on any output, or None."""
    from edge.model.metadata import associated_file, read_metadata

    for tensor in read_metadata(data, name).outputs:
        for f in tensor.associated_files:
            if f.type == "TENSOR_VALUE_LABELS":
                try:
                    return parse_labels(associated_file(data, f.name, name), f"{f.name} packed in {name}")
                except InputError as err:
                    raise ModelCheckError(str(err)) from err
    return None


def detect_raw(detector: Detector, pixels: np.ndarray, what: str = "an image") -> Raw:
    """The op's outputs for contract pixels already at the input size (`what` names the image in an error)."""
    runner = detector.runner
    runner.feed(pixels)
    invoke(runner.interpreter, what)
    return get_raw(runner.interpreter, detector.indices)


def detect_pixels(detector: Detector, pixels: np.ndarray, size: Tuple[int, int], threshold: float = DEFAULT_THRESHOLD,
                  what: str = "an image") -> List[Object]:
    """Objects in contract pixels already at the input size, boxes scaled to `size` (the image's width, height)."""
    return objects(detect_raw(detector, pixels, what), size, threshold, detector.runner.labels)


def detect_file(detector: Detector, source: Union[str, Path, bytes], threshold: float = DEFAULT_THRESHOLD,
                name: Optional[str] = None) -> List[Object]:
    """Objects in one image file (or encoded bytes), boxes in that image's pixels."""
    name = name or (str(source) if not isinstance(source, bytes) else "image bytes")
    return detect_pixels(detector, detector.runner.pixels(source, name), image_size(source, name), threshold, name)


def load(detector: Detector, source: Union[str, Path], name: Optional[str] = None) -> Tuple[np.ndarray, Tuple[int, int]]:
    """(contract pixels at the input size, the image's (width, height)): the part a worker thread can do ahead."""
    return detector.runner.pixels(source, name), image_size(source, name)


def detect_files(detector: Detector, images: Iterable[Any], threshold: float = DEFAULT_THRESHOLD, workers: Optional[int] = None,
                 annotated: Optional[Callable[[Any], Optional[Path]]] = None, feed: bool = False,
                 source_of: Callable[[Any], Any] = lambda image: image,
                 name_of: Callable[[Any], str] = str) -> Iterator[Tuple[Any, Any, Optional[InputError]]]:
    """(image, (objects, (width, height)), None) per image in the order given, or (image, None, the InputError naming
    it): decoded ahead on `workers` threads (None: the default for its interpreter, edge.files.workers), invoked on this
    thread, and on the workers the objects read (an anchor-free head's decode + NMS too) and, with `annotated` (image
    -> file or None), the boxes drawn there.
    `images` may be a stream: it is read as the workers need more, at most a few images ahead (edge.files.prefetch); with
    `feed` (a stream whose next item may be slow to come, as standard input's), on a thread of its own, so the images
    already given are detected and handed back while the next is awaited. An image is `source_of(image)` (a file or
    encoded bytes; default the image itself), named in errors by `name_of(image)` (default its text)."""
    from edge.files.prefetch import pipelined

    runner = detector.runner

    def run(image: Any, loaded: Tuple[np.ndarray, Tuple[int, int]]):
        pixels, size = loaded
        runner.feed(pixels)
        invoke(runner.interpreter, name_of(image))
        return read_outputs(runner.interpreter, detector.indices), size

    def post(image: Any, ran):
        outputs, size = ran
        found = objects(raw_of(outputs, detector.indices), size, threshold, runner.labels)
        target = annotated(image) if annotated is not None else None
        if target is not None:
            annotate(image, found, target)
        return found, size

    return pipelined(images, lambda image: load(detector, source_of(image), name_of(image)), run, post,
                     workers=runner.workers(workers), post_on_workers=True, feed=feed)


def as_record(obj: Object) -> Dict[str, Any]:
    """One object as the JSON the `edge detect --json` file holds."""
    record = {"label": obj.label, "id": obj.id, "score": round(obj.score, 6),
              "box": {k: round(float(v), 2) for k, v in obj.box._asdict().items()}}
    if obj.keypoints is not None:  # a pose model's: [x, y, score] per keypoint, in pixels as the box
        record["keypoints"] = [[round(x, 2), round(y, 2), round(score, 4)] for x, y, score in obj.keypoints]
    return record


def annotate(source: Union[str, Path], found: Sequence[Object], out: Path) -> None:
    """The image with each object's box and "label score" drawn, written to `out` (PNG or JPEG by its suffix)."""
    from PIL import Image, ImageDraw

    with Image.open(source) as image:
        canvas = image.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    width = max(1, round(max(canvas.size) / 200))
    for obj in found:
        colour = _COLOURS[obj.id % len(_COLOURS)]
        draw.rectangle(list(obj.box), outline=colour, width=width)
        draw.text((obj.box.xmin + width + 1, obj.box.ymin + width), f"{obj.label} {obj.score:.2f}", fill=colour)
        for x, y, score in obj.keypoints or ():
            if score >= 0.5:  # a pose model's keypoints that are likely visible
                draw.ellipse([x - width, y - width, x + width, y + width], fill=colour)
    encoded = io.BytesIO()
    canvas.save(encoded, format=Image.registered_extensions().get(Path(out).suffix.lower(), "PNG"))
    write_bytes_atomic(Path(out), encoded.getvalue())  # a stop half way leaves the old file or none, never half a PNG


_COLOURS = ((255, 64, 64), (64, 200, 64), (64, 128, 255), (255, 200, 0), (200, 64, 255), (0, 200, 200))


def is_detector(interpreter: Any) -> bool:
    """Whether the model's outputs are the post-processing op's four (what `edge bench` times differently)."""
    try:
        output_indices(interpreter)
    except ModelCheckError:
        return False
    return True


def reading_seconds(detector: Detector, runs: int) -> List[float]:
    """Seconds of each of `runs` readings of the outputs already computed (get_raw + objects at threshold 0): the
    device's own post-processing after the invoke, which itself includes the model's post-processing op."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        objects(get_raw(detector.runner.interpreter, detector.indices), (640, 480), 0.0, detector.runner.labels)
        times.append(time.perf_counter() - start)
    return times


def end_to_end_rate(detector: Detector, files: Sequence[Path]) -> float:
    """Images per second through what `edge detect` does per image (detect_files: decode and resize ahead on the workers,
    set_input, invoke, read and scale the objects). A file that cannot be read is an error: a benchmark must not skip work."""
    start = time.perf_counter()
    for _, _, error in detect_files(detector, files, 0.0):
        if error is not None:
            raise error
    return len(files) / (time.perf_counter() - start)
