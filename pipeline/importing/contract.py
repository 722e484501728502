"""The imported model's input contract: what its file says of its input, completed by the user's options.

A fact the model states (its input size, its layout, a normalization layer of its own) is read; a fact it does not
state is asked for with an option and never guessed; an option that contradicts the model is refused. The
normalization is in the units `edge --input-mean/--input-std` use: value = (pixel - mean) / std, pixels 0..255.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from edge.errors import InputError
from edge.pixels.preprocess import Normalization, normalization
from pipeline.errors import ConfigError

LAYOUTS = ("nhwc", "nchw")
CHANNEL_ORDERS = ("rgb", "bgr")
FITS = ("stretch", "letterbox")
RAW = (0.0, 1.0)  # mean 0, std 1: the model takes pixels 0..255 as they are


@dataclass(frozen=True)
class Given:
    """The input-contract options as the user gave them (None: not given)."""

    image_size: Optional[int] = None
    layout: Optional[str] = None
    mean: Optional[Tuple[float, ...]] = None
    std: Optional[Tuple[float, ...]] = None
    value_range: Optional[Tuple[float, float]] = None
    channel_order: str = "rgb"
    fit: str = "stretch"

    def check(self) -> None:
        if self.image_size is not None and self.image_size < 1:
            raise ConfigError(f"--image-size {self.image_size}; expected a positive number of pixels")
        if self.layout is not None and self.layout not in LAYOUTS:
            raise ConfigError(f"--layout {self.layout!r}; expected one of {', '.join(LAYOUTS)}")
        if self.channel_order not in CHANNEL_ORDERS:
            raise ConfigError(f"--channel-order {self.channel_order!r}; expected one of {', '.join(CHANNEL_ORDERS)}")
        if self.fit not in FITS:
            raise ConfigError(f"--fit {self.fit!r}; expected one of {', '.join(FITS)}")
        if self.value_range is not None and (self.mean is not None or self.std is not None):
            raise ConfigError("--input-range and --input-mean/--input-std both given; expected one way of saying the normalization")
        if (self.mean is None) != (self.std is None):
            raise ConfigError("--input-mean and --input-std go together; expected both or neither")
        if self.value_range is not None and not self.value_range[0] < self.value_range[1]:
            raise ConfigError(f"--input-range {self.value_range[0]:g},{self.value_range[1]:g}; expected LOW,HIGH with LOW < HIGH")

    def normalization(self) -> Optional[Normalization]:
        """The normalization the options give, or None when they give none."""
        try:
            if self.value_range is not None:
                low, high = self.value_range  # pixel 0 -> low, 255 -> high
                return normalization(-low * 255.0 / (high - low), 255.0 / (high - low),
                                     f"--input-range {low:g},{high:g}")
            if self.mean is not None:
                return normalization(list(self.mean), list(self.std), "--input-mean/--input-std")
        except InputError as err:
            raise ConfigError(str(err)) from err
        return None


@dataclass(frozen=True)
class ModelInput:
    """What a model file says of its one image input."""

    name: str
    shape: List[Optional[int]]  # as declared, None for a dynamic dimension
    dtype: str
    normalizes: Optional[str] = None  # the model's own layer that takes pixels 0..255 (Rescaling, Normalization), if any
    layout: Optional[str] = None  # the layout its format fixes (ONNX from PyTorch: NCHW), if any


@dataclass(frozen=True)
class InputContract:
    """The imported model's input, complete: what the wrapper turns raw RGB pixels 0..255 into."""

    image_size: int
    layout: str
    norm: Normalization
    channel_order: str
    fit: str
    said: Dict[str, str]  # each fact -> where it came from ("the model", "--image-size", ...)

    def as_record(self) -> Dict[str, Any]:
        return {"image_size": self.image_size, "layout": self.layout, "mean": list(self.norm.mean), "std": list(self.norm.std),
                "normalization": self.norm.source, "channel_order": self.channel_order, "fit": self.fit, "from": self.said}


def resolve(model: ModelInput, given: Given, where: str) -> InputContract:
    """The complete contract of `model` (read from `where`) with `given`; ConfigError on what is missing or contradicts."""
    given.check()
    shape = model.shape
    if len(shape) != 4:
        raise ConfigError(f"{where}: input {model.name!r} has shape {_shown(shape)}; expected an image batch of rank 4 "
                          "([batch, height, width, 3] or [batch, 3, height, width])")
    if not model.dtype.startswith("float"):
        raise ConfigError(f"{where}: input {model.name!r} is {model.dtype}; expected a float image input")
    said: Dict[str, str] = {}
    layout = _layout(model, given, where, said)
    channels, height, width = (shape[3], shape[1], shape[2]) if layout == "nhwc" else (shape[1], shape[2], shape[3])
    if channels != 3:
        raise ConfigError(f"{where}: input {model.name!r} has shape {_shown(shape)}, {channels} channel(s) in layout "
                          f"{layout.upper()}; expected 3 (RGB)")
    size = _size(height, width, model, given, where, said)
    norm = _norm(model, given, where, said)
    if given.fit != "stretch":
        raise ConfigError(f"--fit {given.fit}: edgeflow's classification stages and the clients they reproduce (pycoral, "
                          "MediaPipe) stretch the picture to the input; expected --fit stretch for --task classify")
    said.update(channel_order="--channel-order" if given.channel_order != "rgb" else "default (RGB, as edgeflow decodes)",
                fit="default (stretch)")
    return InputContract(size, layout, norm, given.channel_order, given.fit, said)


def _layout(model: ModelInput, given: Given, where: str, said: Dict[str, str]) -> str:
    shape = model.shape
    if model.layout is not None:
        if given.layout is not None and given.layout != model.layout:
            raise ConfigError(f"--layout {given.layout} contradicts {where}, whose input {model.name!r} is {model.layout.upper()} "
                              f"{_shown(shape)}; expected --layout {model.layout} or none")
        said["layout"] = "the model"
        return model.layout
    fits = [layout for layout, axis in (("nhwc", 3), ("nchw", 1)) if shape[axis] == 3]
    if given.layout is not None:
        if given.layout not in fits:
            raise ConfigError(f"--layout {given.layout} contradicts {where}'s input {model.name!r} {_shown(shape)}: it has "
                              f"no 3 channels there; expected {' or '.join(fits) or 'an input with 3 channels'}")
        said["layout"] = "--layout"
        return given.layout
    if len(fits) == 1:
        said["layout"] = "the model (3 channels on one axis only)"
        return fits[0]
    if not fits:
        raise ConfigError(f"{where}: input {model.name!r} has shape {_shown(shape)}, with 3 channels on neither axis 1 (NCHW) "
                          "nor axis 3 (NHWC); expected an RGB image input")
    raise ConfigError(f"{where}: input {model.name!r} has shape {_shown(shape)}, which could be NHWC or NCHW; "
                      "expected --layout nhwc or --layout nchw")


def _size(height, width, model: ModelInput, given: Given, where: str, said: Dict[str, str]) -> int:
    if height is None or width is None:
        if given.image_size is None:
            raise ConfigError(f"{where}: input {model.name!r} has shape {_shown(model.shape)}, a dynamic height or width; "
                              "expected --image-size N (the Edge TPU takes static shapes only)")
        said["image_size"] = "--image-size"
        return given.image_size
    if height != width:
        raise ConfigError(f"{where}: input {model.name!r} is {height}x{width}; expected a square input (edgeflow's stages "
                          "feed square images)")
    if given.image_size is not None and given.image_size != height:
        raise ConfigError(f"--image-size {given.image_size} contradicts {where}, whose input {model.name!r} is "
                          f"{height}x{width}; expected --image-size {height} or none")
    said["image_size"] = "the model"
    return height


def _norm(model: ModelInput, given: Given, where: str, said: Dict[str, str]) -> Normalization:
    norm = given.normalization()
    if model.normalizes:
        if norm is not None and (norm.mean, norm.std) != ((0.0,) * 3, (1.0,) * 3):
            raise ConfigError(f"{norm.source} contradicts {where}, which normalizes its own input ({model.normalizes}: it "
                              "takes pixels 0..255); expected no normalization options")
        said["normalization"] = f"the model ({model.normalizes})"
        return normalization(*RAW, f"pixels 0..255: the model's own {model.normalizes}")
    if norm is None:
        raise ConfigError(f"{where} does not say how its input is normalized; expected --input-mean M --input-std S "
                          "(value = (pixel - M) / S, pixels 0..255; one number or R,G,B), or --input-range LOW,HIGH "
                          "(e.g. 0,1 or -1,1), or --input-mean 0 --input-std 1 for pixels 0..255 as they are")
    said["normalization"] = norm.source
    return norm


def _shown(shape: Sequence[Optional[int]]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
