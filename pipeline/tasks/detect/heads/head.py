"""What a detector head is to the detection task: every step where the heads differ, behind one class. Each head's folder
(pipeline/tasks/detect/heads/<head>/) holds its model, loss, assignment, export tail and host decoding, and one
subclass of `Head` in its head.py; pipeline/tasks/detect/heads/__init__.py registers it.

The task asks its run's head (`heads.of_run(run)`) or its config's (`heads.get(config.head)`) and never which head it is.
"""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple


class Conversion(NamedTuple):
    """What differs between the heads' exports (pipeline/tasks/detect/export.py does the rest alike)."""

    what: str  # the model's name in its metadata: "<model> <what> int8 (<run>)"
    facts: Dict[str, object]  # the head's own facts, first in what the manifest records
    convert: Callable[..., bytes]  # (keras model, size, labels, int8=, calibration=, name=, record=) -> the .tflite
    describes: Callable[[bool], str]  # int8 -> what the export's table says the file is


class Head:
    """One detector head. `name` is what `--head` takes and what a run records under detection.head."""

    name: str = ""
    # Whether `pipeline import --task detect` brings models from elsewhere into this head's layout (import_steps).
    imports: bool = False

    def strides(self) -> Tuple[int, ...]:
        """The feature strides of the head's levels: the coarsest one divides the input size."""
        raise NotImplementedError

    def build(self, config, num_classes: int, imagenet: bool):
        """The training model: the detector's layers with the head's loss in its train_step (uncompiled)."""
        raise NotImplementedError

    def with_targets(self, config, ds):
        """The fitted input pipeline's items as the head's training step takes them: (images, targets)."""
        raise NotImplementedError

    def predict(self, model, examples, config, resize: str, nms) -> list:
        """The held-out evaluation after training: one Detections per example, per-class NMS by `nms`."""
        raise NotImplementedError

    def outputs(self) -> dict:
        """What the manifest's `model` entry says of the detector's outputs, by name."""
        raise NotImplementedError

    def detection(self, config, common: dict) -> dict:
        """The manifest's `detection` entry of a run trained with this head: `common` (resize, most boxes) and what
        export, parity and the device need to read the head's outputs."""
        raise NotImplementedError

    def conversion(self, run) -> Conversion:
        """How `pipeline export` converts the run's detector."""
        raise NotImplementedError

    def float_model(self, run):
        """The run's float detector as a Keras model (what export converts and the remedy ladder edits)."""
        import tf_keras as keras

        return keras.models.load_model(str(run.artifact("keras_model")), compile=False)

    def reference(self, run, pixels: Sequence) -> list:
        """The float detector's detections on contract pixels that parity and the remedy ladder judge by, decoded as the
        exported file is read."""
        raise NotImplementedError

    def import_steps(self) -> Optional["ImportSteps"]:
        """What `pipeline import --task detect` does in this head's layout (None: this head imports nothing)."""
        return None


class ImportSteps:
    """A head's part of importing a detector from elsewhere (pipeline/tasks/detect/importer.py does the data and labels)."""

    def read(self, fmt: str, path, scratch, config, sample_pixels: Callable[[], object]):
        raise NotImplementedError

    def contract(self, loaded, config):
        raise NotImplementedError

    def wrap(self, loaded, contract, folder) -> None:
        raise NotImplementedError

    def check(self, folder, contract, loaded) -> None:
        raise NotImplementedError

    def record(self, model_entry: dict, loaded, contract) -> Tuple[dict, dict]:
        """(the manifest's `model` entry, its `detection` entry) of the imported detector."""
        raise NotImplementedError


def named(heads: List[Head]) -> Dict[str, Head]:
    """The heads by name, each name once."""
    found: Dict[str, Head] = {}
    for head in heads:
        assert head.name and head.name not in found, f"head {head.name!r} registered twice or unnamed"
        found[head.name] = head
    return found


def pick(heads: Dict[str, Head], name: str):
    """The head named `name` among `heads` (a task's registry); ConfigError naming the choices otherwise."""
    from pipeline.errors import ConfigError

    try:
        return heads[name]
    except KeyError:
        raise ConfigError(f"--head {name}; expected one of {', '.join(heads)}") from None
