"""The pixel contract as one value: read and checked once from a record, then used to decode, resize and feed.

    from edge.pixels.contract import PixelContract
    contract = PixelContract.from_record(sidecar["preprocessing"], "sidecar model_int8.tflite.json")
    pixels = contract.load_pixels("cat.jpg", (224, 224))        # decoded at the recorded JPEG scale, resized
    tensor = contract.to_input(pixels, interpreter.get_input_details()[0])
    contract.as_record()                                          # the dict manifests and sidecars hold

A record is what the pipeline writes as `preprocessing` in the manifest, each model's sidecar and a
bundle's manifest. The steps themselves live in edge.pixels.preprocess (where pixels become tensors); this
module says which version of them a model follows: version 2 decodes a JPEG at the largest 1/k scale
that keeps the model's size, version 1 at full size. A model from elsewhere has no record
(`PixelContract.unrecorded`): its JPEGs are decoded at full size, as its own trainers did, and its
normalization comes from its TFLite metadata or the user. Training's TensorFlow decode
(pipeline/data/decode.py) asks the contract it records whether to decode at reduced scale (`scaled`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from edge.pixels import preprocess
from edge.errors import InputError
from edge.pixels.preprocess import RAW_PIXELS, Normalization

CONTRACT_VERSION = 2  # what the pipeline records for the models it trains now
# Version 1 models (full-size JPEG decoding) still run, decoded as they were trained.
HONOURED_VERSIONS = (1, 2)
DECODE = "Pillow (JPEG: libjpeg accurate integer DCT); EXIF orientation not applied"
JPEG_SCALE = "largest 1/k (k in 8, 4, 2, 1) with k <= width // input width and k <= height // input height"
COLOR = "RGB (grey repeated, palette expanded, alpha dropped; CMYK, 16-bit and float refused)"
RESIZE = "bilinear_antialias"
CROP = "stretch"
_UPDATE = "this model was made for another pixel contract (update edgeflow on this device)"


@dataclass(frozen=True)
class PixelContract:
    """How an image becomes one model's input: the decode version and the normalization (with where it came from)."""

    norm: Normalization = RAW_PIXELS  # the pipeline's own models take raw pixels and normalize inside
    version: Optional[int] = CONTRACT_VERSION  # None: no recorded contract (a model from elsewhere)

    def __post_init__(self) -> None:
        if self.version is not None and self.version not in HONOURED_VERSIONS:
            raise ValueError(f"pixel contract version {self.version!r}, expected one of {HONOURED_VERSIONS} or None")

    @classmethod
    def from_record(cls, recorded: Any, where: str) -> "PixelContract":
        """The contract a record holds; InputError naming the field when this code cannot honour it."""
        if not isinstance(recorded, dict):
            raise InputError(f"{where} records preprocessing {recorded!r}, expected a pixel contract object")
        version = recorded.get("version")
        if type(version) is not int or version not in HONOURED_VERSIONS:  # noqa: E721 - True is not version 1
            raise InputError(f"{where} records preprocessing version {version!r}, expected one of "
                             f"{', '.join(map(str, HONOURED_VERSIONS))}: {_UPDATE}")
        expected = {"resize": RESIZE, "crop": CROP}
        if version >= 2:
            expected["jpeg_scale"] = JPEG_SCALE
        for key, value in expected.items():
            if recorded.get(key) != value:
                raise InputError(f"{where} records preprocessing {key} {recorded.get(key)!r}, expected {value!r}: {_UPDATE}")
        norm = preprocess.normalization(recorded.get("mean", []), recorded.get("std", []), f"recorded in {where}")
        return cls(norm, version)

    @classmethod
    def unrecorded(cls, norm: Normalization) -> "PixelContract":
        """A model from elsewhere: full-size JPEG decoding and the normalization its metadata or its user gives."""
        return cls(norm, None)

    @property
    def recorded(self) -> bool:
        return self.version is not None

    @property
    def scaled(self) -> bool:
        """Whether JPEGs are decoded at reduced scale (version 2 on); no record decodes at full size."""
        return self.version is not None and self.version >= 2

    def as_record(self) -> Dict[str, Any]:
        """The contract as JSON-ready data, key for key what manifests and sidecars hold."""
        if self.version is None:
            raise ValueError("a model's unrecorded contract has no record; only edgeflow's contracts are recorded")
        record: Dict[str, Any] = {"version": self.version, "decode": DECODE}
        if self.scaled:
            record["jpeg_scale"] = JPEG_SCALE
        record.update({"color": COLOR, "resize": RESIZE, "crop": CROP, "mean": list(self.norm.mean), "std": list(self.norm.std)})
        return record

    def load_pixels(self, source: Union[str, Path, bytes, np.ndarray], size: Tuple[int, int], name: Optional[str] = None) -> np.ndarray:
        """uint8 [height, width, 3] pixels of one image at `size` (width, height): decoded (at this version's
        JPEG scale) unless already pixels, then resized."""
        return preprocess.load_pixels(source, size, name=name, scaled=self.scaled)

    def to_input(self, pixels: np.ndarray, details: Dict[str, Any]) -> np.ndarray:
        """The input tensor (batch 1) for pixels: normalized then quantized, or passed through when the input's
        quantization already encodes the normalization."""
        return preprocess.to_input(pixels, self.norm, details)

    def describe(self, details: Dict[str, Any]) -> str:
        """Two lines for the user: the normalization and how it reaches the input; how JPEGs are decoded."""
        if self.scaled:
            decode = "decode: JPEGs at reduced scale (the recorded pixel contract)"
        else:
            decode = "decode: JPEGs at full size (" + (f"pixel contract version {self.version})" if self.recorded
                                                       else "no recorded pixel contract)")
        return preprocess.describe(self.norm, details) + "\n" + decode
