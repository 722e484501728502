"""What a model's TFLite metadata says, as plain frozen dataclasses: one per table of metadata_schema.fbs we write.

    from pipeline.metadata.description import AssociatedFile, FileType, ImageContent, ModelDescription, Normalization, Tensor
    labels = AssociatedFile("labels.txt", b"cat\\ndog\\n", FileType.TENSOR_AXIS_LABELS, "class names")
    described = ModelDescription(name="pets", inputs=(Tensor("image", content=ImageContent(), process_units=(Normalization((127.5,), (127.5,)),)),),
                                 outputs=(Tensor("scores", content=FeatureContent(), files=(labels,)),))

`flatbuffer.encode(described)` turns it into the metadata flatbuffer; `model_file.attach` puts it in a model with
the files' bytes packed. The enums keep the schema's numbers (they are what the flatbuffer stores). An object
detector describes its four outputs the same way: BoundingBoxContent with a range for the locations, a
TENSOR_VALUE_LABELS file on the classes, FeatureContent for scores and the number of detections.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Optional, Tuple, Union


class FileType(IntEnum):
    UNKNOWN = 0
    DESCRIPTIONS = 1
    TENSOR_AXIS_LABELS = 2  # one name per line, for each position of an axis (a classifier's scores)
    TENSOR_VALUE_LABELS = 3  # one name per line, for each value of the tensor (a detector's class ids)
    TENSOR_AXIS_SCORE_CALIBRATION = 4
    VOCABULARY = 5  # schema 1.0.1
    SCANN_INDEX_FILE = 6  # schema 1.4.0


class ColorSpace(IntEnum):
    UNKNOWN = 0
    RGB = 1
    GRAYSCALE = 2


class BoxType(IntEnum):
    UNKNOWN = 0
    BOUNDARIES = 1  # left, top, right, bottom
    UPPER_LEFT = 2  # x, y of the upper left corner, width, height
    CENTER = 3  # x, y of the centre, width, height


class CoordinateType(IntEnum):
    RATIO = 0  # 0..1 of the image's size
    PIXEL = 1


class ScoreTransform(IntEnum):
    IDENTITY = 0
    LOG = 1
    INVERSE_LOGISTIC = 2


@dataclass(frozen=True)
class AssociatedFile:
    name: str  # its name in the zip appended to the model; a bare file name
    content: bytes  # packed as is
    type: FileType = FileType.UNKNOWN
    description: Optional[str] = None
    locale: Optional[str] = None  # several label files of one tensor are told apart by it ("en", "fr")
    version: Optional[str] = None  # the file's own version (schema 1.4.1)


@dataclass(frozen=True)
class FeatureContent:
    """Plain values (scores, counts, class ids)."""

    range: Optional[Tuple[int, int]] = None  # Content.range: the dimensions one object spans; None = all but the batch


@dataclass(frozen=True)
class ImageContent:
    color_space: ColorSpace = ColorSpace.RGB
    default_size: Optional[Tuple[int, int]] = None  # (width, height), for a tensor of dynamic shape
    range: Optional[Tuple[int, int]] = None


@dataclass(frozen=True)
class BoundingBoxContent:
    type: BoxType = BoxType.BOUNDARIES
    coordinates: CoordinateType = CoordinateType.RATIO
    index: Tuple[int, ...] = ()  # where each of the type's four values sits; () = the type's own order
    range: Optional[Tuple[int, int]] = None  # a detector's [1, N, 4] boxes: (2, 2)


Content = Union[FeatureContent, ImageContent, BoundingBoxContent]


@dataclass(frozen=True)
class Normalization:
    """tensor = (value - mean) / std, per channel (one value stands for every channel)."""

    mean: Tuple[float, ...]
    std: Tuple[float, ...]


@dataclass(frozen=True)
class ScoreCalibration:
    """Sigmoid calibration of scores; its parameters are a TENSOR_AXIS_SCORE_CALIBRATION file of the same tensor."""

    transform: ScoreTransform = ScoreTransform.IDENTITY
    default_score: float = 0.0


@dataclass(frozen=True)
class ScoreThreshold:
    threshold: float  # results scoring below it are low-confidence


ProcessUnit = Union[Normalization, ScoreCalibration, ScoreThreshold]


@dataclass(frozen=True)
class Stats:
    max: Tuple[float, ...] = ()  # per channel (one value stands for every channel)
    min: Tuple[float, ...] = ()


@dataclass(frozen=True)
class Tensor:
    """One input or output of the model, in the order of the subgraph's inputs or outputs."""

    name: str
    description: Optional[str] = None
    content: Optional[Content] = None
    process_units: Tuple[ProcessUnit, ...] = ()
    stats: Optional[Stats] = None
    files: Tuple[AssociatedFile, ...] = ()
    dimension_names: Tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelDescription:
    name: str
    description: Optional[str] = None
    version: Optional[str] = None
    author: Optional[str] = None
    license: Optional[str] = None
    inputs: Tuple[Tensor, ...] = ()  # of subgraph 0, the one TFLite runs
    outputs: Tuple[Tensor, ...] = ()
    files: Tuple[AssociatedFile, ...] = ()  # the model's own (a README, a record of where it came from)

    def all_files(self) -> Tuple[AssociatedFile, ...]:
        """Every file to pack: the model's, then each input's and output's, each name once."""
        seen = {}
        for f in self.files + tuple(f for t in self.inputs + self.outputs for f in t.files):
            if f.name in seen and seen[f.name].content != f.content:
                raise ValueError(f"two different files are named {f.name!r}; expected one content per packed name")
            seen.setdefault(f.name, f)
        return tuple(seen.values())
