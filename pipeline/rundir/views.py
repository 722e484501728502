"""Typed views of the manifest's sections, for the stages and the report that read them.

    run = Run.open(run_dir)
    run.data.train_spec, run.data.heldout_fraction       # what train recorded of its data and split
    run.training.global_batch, run.model.image_size       # how it trained, what it trained

Each view is a snapshot of one section as `pipeline train` wrote it. A fact a stage cannot work
without raises ManifestError naming the field (`need`); a fact only shown (the report) is None when
an older run did not record it, so a page still renders.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from pipeline.errors import ManifestError


def _section(manifest: Dict[str, Any], *keys: str) -> Dict[str, Any]:
    """The dict at manifest[keys[0]][keys[1]]...; {} where a level is missing or null."""
    value: Any = manifest
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class _View:
    section: str  # the manifest field this view reads, for error messages
    where: str  # the manifest's path, for error messages
    record: Dict[str, Any] = field(repr=False)

    def get(self, key: str) -> Any:
        """A shown fact: None when the run did not record it."""
        return self.record.get(key)

    def need(self, key: str, *within: str) -> Any:
        """A fact the stage cannot go on without (at record[within...][key])."""
        record = _section(self.record, *within)
        if key not in record or record[key] is None:
            raise ManifestError(f"{self.where} records no {'.'.join((self.section, *within, key))}; expected the manifest "
                                "written by `pipeline train`")
        return record[key]


def _needed(key: str, kind: type, *within: str, doc: Optional[str] = None) -> property:
    """A view's property: the fact `key` (at within...) a stage cannot go on without, as `kind`."""
    return property(lambda view: kind(view.need(key, *within)), doc=doc)


class DataView(_View):
    """`data`: the training data spec, the separate held-out data if any, the split and the examples' identity."""

    @property
    def train(self) -> Dict[str, Any]:
        """The training data as its source describes itself (spec, kind, counts); {} when not recorded."""
        return _section(self.record, "train")

    @property
    def train_spec(self) -> str:
        """The training data spec, to open the data again."""
        spec = self.train.get("spec")
        if not isinstance(spec, str):
            raise ManifestError(f"{self.where} records no data.train.spec; expected the manifest written by `pipeline train`")
        return spec

    @property
    def val_spec(self) -> Optional[str]:
        """The separate held-out data (`--val-data`); None when the held-out examples are a split of the training data."""
        return _section(self.record, "val").get("spec")

    @property
    def images(self) -> Tuple[str, ...]:
        """The folders (`--images`, in order) a COCO spec's file names were also looked for in, so a later stage
        reading the data again finds the same files; () when none were given or the run predates the option."""
        folders = self.record.get("images") or []
        if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
            raise ManifestError(f"{self.where} records data.images {folders!r}; expected a list of folders")
        return tuple(folders)

    @property
    def split(self) -> Dict[str, Any]:
        """How the held-out examples were chosen: method, heldout_fraction, seed, train_examples, heldout_examples."""
        return _section(self.record, "split")

    heldout_fraction = _needed("heldout_fraction", float, "split")
    seed = _needed("seed", int, "split")

    @property
    def classes(self) -> Optional[list]:
        """The class names the identity record lists (the run's labels), None before it existed."""
        return (self.identity or {}).get("classes")

    @property
    def identity(self) -> Optional[Dict[str, Any]]:
        """pipeline.data.identity's record of the examples (classes, training summary, held-out list); None before it existed."""
        return self.record.get("identity") if isinstance(self.record.get("identity"), dict) else None

    def summary(self, split: str) -> Dict[str, Any]:
        """Counts per class and digest of the 'train' or 'heldout' examples, without the held-out list; {} when absent."""
        return {k: v for k, v in _section(self.record, "identity", split).items() if k != "examples"}


class TrainingView(_View):
    """`training`: the strategy, batch, schedule and the train options as given."""

    epochs = _needed("epochs", int)

    @property
    def global_batch(self) -> int:
        """The global batch `pipeline train` used (QAT fine-tunes at it)."""
        batch = self.record.get("global_batch")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ManifestError(
                f"{self.where} records training.global_batch {batch!r}; expected the positive global batch `pipeline train` "
                "writes (QAT fine-tunes at the batch the model was trained with)")
        return batch

    @property
    def config(self) -> Dict[str, Any]:
        """The train options as given (TrainConfig.as_dict); {} when not recorded."""
        return _section(self.record, "config")

    @property
    def feed(self) -> Dict[str, Any]:
        return _section(self.record, "feed")

    def provenance(self) -> Dict[str, Any]:
        """What a model's own record says of its training: epochs, seed, strategy, mixed precision (those recorded)."""
        return {k: self.record.get(k) for k in ("epochs", "seed", "strategy", "mixed_precision") if k in self.record}


class ModelView(_View):
    """`model`: the registry model, its input size, classes, options and starting weights."""

    name = _needed("name", str, doc="the registry model's name")
    image_size = _needed("image_size", int, doc="the square input size")

    @property
    def starting_weights(self) -> Optional[str]:
        """Where the starting weights came from ('random' when none were loaded); None when the run does not say."""
        if "weights" not in self.record:
            return None
        return (self.record["weights"] or {}).get("source", "random")


def views(manifest: Dict[str, Any], where: str) -> Tuple[DataView, TrainingView, ModelView]:
    return (DataView("data", where, _section(manifest, "data")),
            TrainingView("training", where, _section(manifest, "training")),
            ModelView("model", where, _section(manifest, "model")))
