"""One model opened on this device, with its checks, ready to score images: what `edge classify | evaluate |
bench`, parity's TFLite scoring and the benchmarks all run.

    from edge.answers.runner import Runner
    runner = Runner.open("run/model_int8.tflite")         # sha256, pixel contract, labels, interpreter
    print(runner.classify("cat.jpg", k=3))                 # [Class(id, score, label), ...]
    for path, scores, error in runner.score_files(paths):  # decoded ahead on a worker thread, in order
        ...

Opening a model (`Runner.open`) is the device's policy, in this order:
  sha256     checked against the sidecar (`<model>.json`) and the run's manifest.json when either is
             there (verify=False skips that and says so); a record that does not list the model is refused.
  interpreter  edge.model.interpreter: the Edge TPU when the model is compiled for it (edgetpu=True requires it),
             else the fastest installed CPU interpreter, or the one `backend` names.
  contract   the pixel contract recorded next to the model (then mean/std options are refused); a record
             without one is refused. No record: mean/std when given, else the model's TFLite metadata, else
             raw pixels for a float input (as set_input feeds it) and pycoral's 128/128 for a quantized one,
             with JPEGs decoded at full size (edge.pixels.contract.PixelContract.unrecorded).
  labels     edge.model.labels.choose_labels: a labels file, else the recorded labels, else the ones packed in the model.
Each choice is said through `say` (the CLI prints it on stderr): a wrong guess is the usual cause of noise.
One policy for every kind of model: edge.answers.detect.open_detector is `Runner.open(..., kind=DETECTOR)`, whose `Kind`
checks the outputs are the detection op's (before the contract) and looks for packed labels on the class-id output.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np

from edge.files.bounded import MAX_MODEL_BYTES, read_regular
from edge.answers.classify import (
    Class,
    input_details,
    input_size,
    input_writer,
    invoke,
    output_details,
    score_reader,
    top_k,
)
from edge.pixels.contract import PixelContract
from edge.errors import InputError, IntegrityError
from edge.model.integrity import (
    ModelRecord,
    check_agreement,
    find_records,
    metadata_record,
    recorded_labels,
    sha256_bytes,
    sidecar_path,
    verify,
)
from edge.model.interpreter import LoadedModel, open_model
from edge.model.labels import choose_labels
from edge.model.metadata import ModelMetadata, read_metadata
from edge.files.prefetch import prefetch
from edge.pixels.preprocess import PYCORAL_DEFAULT, normalization
from edge.files.workers import checked_workers

T = TypeVar("T")
# A float input with no recorded contract, no metadata and no --input-mean/--input-std.
FLOAT_UNRECORDED = normalization(0.0, 1.0, "raw pixels 0..255: a float input with no recorded pixel contract, no "
                                           "metadata and no --input-mean/--input-std, fed as set_input feeds it")
Say = Callable[[str], None]


def quiet(_: str) -> None:
    """The library's default: it says nothing; the CLI passes a function that prints on stderr."""


class Runner:
    """An opened model: its interpreter, the pixel contract that feeds it, its class names and checked sha256."""

    def __init__(self, loaded: LoadedModel, contract: PixelContract, labels: Optional[List[str]] = None, sha256: str = ""):
        self.loaded = loaded
        self.contract = contract
        self.labels = labels  # class names by id; None = report class ids
        self.sha256 = sha256  # of the bytes the interpreter loaded; "" when the caller did not read them
        self.interpreter = loaded.interpreter
        self.outputs: Any = None  # what `Runner.open`'s kind found of the outputs (a detector's tensor indices)

    # Asked for when images are scored, not at opening: `edge bench` times any model, an image classifier or not.
    @functools.cached_property
    def size(self) -> Tuple[int, int]:
        """(width, height) of the model's image input, as Pillow counts sizes."""
        return input_size(self.interpreter)

    @functools.cached_property
    def num_classes(self) -> int:
        """How many scores the model gives per image."""
        return int(output_details(self.interpreter)["shape"][-1])

    @classmethod
    def open(cls, model: Union[str, Path], *, edgetpu: Optional[bool] = None, threads: Optional[int] = None,
             backend: Optional[str] = None, verify_sha256: bool = True, labels_file: Optional[Union[str, Path]] = None,
             mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None, say: Say = quiet,
             kind: Optional["Kind"] = None) -> "Runner":
        """Open `model` by the device's policy (module docstring). edgetpu=True requires the Edge TPU; None lets a
        compiled model go to it. mean/std (pycoral's --input-mean/--input-std) only for a model with no record.
        `kind`: what differs for a model that is not a classifier (edge.answers.detect's DETECTOR); the runner's `outputs`
        holds what its check of the outputs found."""
        kind = kind or CLASSIFIER
        path = Path(model)
        if not path.exists():
            raise InputError(f"model {path} not found, expected a .tflite file")
        data = read_regular(path, MAX_MODEL_BYTES, "model", InputError)  # a FIFO or a huge file refused before reading
        records, sha256 = checked_records(path, data, verify_sha256, say)
        loaded = open_model(path, edgetpu=edgetpu, threads=threads, data=data, backend=backend)  # checks the file first
        say(f"interpreter: {loaded.backend} ({loaded.why})")
        outputs = kind.outputs(loaded.interpreter)  # a model whose outputs are not this kind's is refused before more work
        # The model's metadata, parsed once: its own record (pipeline exports carry one) gives the contract when no
        # sidecar or manifest is there, and a sidecar or manifest that contradicts it is refused; its normalization
        # and packed label file are the last resorts for a model from elsewhere.
        meta = read_metadata(data, path.name)
        embedded = metadata_record(path, data, meta)
        check_agreement(records, embedded)
        contract = choose_contract(records, embedded, meta, mean, std, input_details(loaded.interpreter))
        labels, labels_from = kind.labels(labels_file, records, embedded, data, meta, str(path))
        say(contract.describe(input_details(loaded.interpreter)))
        say(labels_from)
        runner = cls(loaded, contract, labels, sha256)
        runner.outputs = outputs
        return runner

    @classmethod
    def with_contract(cls, model: Union[str, Path, bytes], contract: PixelContract, *, edgetpu: Optional[bool] = None,
                      threads: Optional[int] = None, backend: Optional[str] = None,
                      labels: Optional[List[str]] = None) -> "Runner":
        """A model whose contract the caller already knows (parity reads it from the run's manifest): no records looked up."""
        return cls(open_model(model, edgetpu=edgetpu, threads=threads, backend=backend), contract, labels)

    def pixels(self, source: Any, name: Optional[str] = None) -> np.ndarray:
        """The contract's pixels of one image (a file, encoded bytes or uint8 pixels) at the model's input size."""
        return self.contract.load_pixels(source, self.size, name=name)

    @functools.cached_property
    def feed(self) -> Callable[[Any], None]:
        """set_input for this model by its contract, as a function of one image (the input's details read once)."""
        return input_writer(self.interpreter, self.contract.norm)

    @functools.cached_property
    def read_scores(self) -> Callable[[], np.ndarray]:
        """get_scores for this model, called after an invoke (the output's details read once)."""
        return score_reader(self.interpreter)

    def workers(self, asked: Optional[int]) -> int:
        """The decode workers to run beside this model: `asked`, or the default for its interpreter (edge.files.workers)."""
        return checked_workers(asked, edgetpu=self.loaded.edgetpu)

    def scores(self, pixels: np.ndarray, what: str = "an image") -> np.ndarray:
        """float32 scores of one image's pixels: set_input, invoke, get_scores (`what` names it in an error)."""
        self.feed(pixels)
        invoke(self.interpreter, what)
        return self.read_scores()

    def top_k(self, scores: np.ndarray, k: int = 1) -> List[Class]:
        """The k best of one image's scores as Class(id, score, label), best first."""
        return top_k(scores, k=k, labels=self.labels)

    def classify(self, source: Any, k: int = 1, name: Optional[str] = None) -> List[Class]:
        """The k best classes of one image (file, bytes or pixels), best first."""
        name = name or (str(source) if isinstance(source, (str, Path)) else "an image")
        return self.top_k(self.scores(self.pixels(source, name), name), k)

    def score_files(self, items: Iterable[T], path_of: Callable[[T], Any] = lambda item: item,
                    name_of: Optional[Callable[[T], str]] = None,
                    workers: Optional[int] = None) -> Iterator[Tuple[T, Optional[np.ndarray], Optional[InputError]]]:
        """(item, scores, None) per item in order, or (item, None, the InputError naming the file it could not read).
        `path_of(item)` is a file or encoded bytes; `name_of(item)` names it in errors (default: its path).
        The next images are decoded and resized on `workers` threads (None: the default for its interpreter,
        edge.files.workers) while the interpreter runs."""
        name = name_of or (lambda item: str(path_of(item)))

        def load(item: T) -> np.ndarray:
            return self.pixels(path_of(item), name(item))

        for item, pixels, error in prefetch(items, load, workers=self.workers(workers)):
            yield item, (None if error is not None else self.scores(pixels, name(item))), error

    def score_all(self, images: np.ndarray) -> np.ndarray:
        """[N, classes] scores of [N, H, W, 3] uint8 pixels already at the model's size, one at a time as a device runs them."""
        return np.stack([self.scores(pixels, f"image {i}") for i, pixels in enumerate(images)]).astype(np.float32)


class Kind(NamedTuple):
    """What opening differs in between a classifier and another kind of model (a detector: edge.answers.detect.DETECTOR)."""

    outputs: Callable[[Any], Any]  # interpreter -> what the outputs are (raises ModelCheckError for a wrong model)
    labels: Callable[..., Tuple[Optional[List[str]], str]]  # (labels_file, records, embedded, data, meta, name) -> labels, where from


def _classifier_labels(labels_file, records, embedded, data, meta, name):
    """--labels, else the recorded labels, else the label file packed on the scores output."""
    return choose_labels(labels_file, recorded_labels(records), data, meta)


CLASSIFIER = Kind(lambda interpreter: None, _classifier_labels)


def checked_records(path: Path, data: bytes, verify_sha256: bool, say: Say) -> Tuple[List[ModelRecord], str]:
    """(the sidecar and manifest records of the model, its sha256), after checking the bytes against them."""
    if not verify_sha256:
        say(f"WARNING: --no-verify: the sha256 of {path} is NOT checked; this device may run a model that did not pass parity")
        try:
            return find_records(path), sha256_bytes(data)
        except IntegrityError:
            return [], sha256_bytes(data)
    records = find_records(path)
    if not records:
        say(f"note: no {sidecar_path(path).name} or manifest.json next to {path}; its sha256 is not checked")
    return records, verify(path, data, records)


def choose_contract(records: List[ModelRecord], embedded: Optional[ModelRecord], meta: ModelMetadata, mean: Optional[Sequence[float]],
              std: Optional[Sequence[float]], details: Dict[str, Any]) -> PixelContract:
    """The recorded contract (sidecar or manifest, else the one the model carries), else mean/std (the other one
    pycoral's 128 when only one is given), else the model's TFLite metadata normalization, else what the input
    takes by itself: raw pixels for a float input, pycoral's 128, 128 for a quantized one."""
    recorded = next((r for r in records if r.preprocessing is not None), embedded)  # the record holding the contract
    if records and recorded is None:
        raise InputError(f"{records[0].source} vouches for this model but records no pixel contract (it was written by an "
                         "earlier edgeflow); export the model again, so the device knows how to feed it")
    if recorded is not None:
        if mean is not None or std is not None:
            raise InputError(f"--input-mean/--input-std do not apply: {recorded.source} records this model's pixel contract")
        return PixelContract.from_record(recorded.preprocessing, str(recorded.source))
    if mean is not None or std is not None:
        return PixelContract.unrecorded(normalization(PYCORAL_DEFAULT.mean if mean is None else mean,
                                                      PYCORAL_DEFAULT.std if std is None else std, "--input-mean/--input-std"))
    if meta.mean is not None and meta.std is not None:
        return PixelContract.unrecorded(normalization(meta.mean, meta.std, "the model's TFLite metadata"))
    if np.dtype(details["dtype"]).kind == "f":
        # pycoral's 128/128 is for quantized inputs (its classify example takes no other); a float model this
        # pipeline wrote takes raw pixels and normalizes inside, and set_input feeds a float input the same way.
        return PixelContract.unrecorded(FLOAT_UNRECORDED)
    return PixelContract.unrecorded(PYCORAL_DEFAULT)
