"""The model registry: a builder per architecture, each returning an uncompiled tf-keras model.

Every model starts with `Rescaling(1/127.5, offset=-1)`, so it takes raw pixels (the int8
export wraps it to take Coral's input grid, scale 1/128 and zero point 128: the device feeds camera
pixels as they are). Every model ends in a float32 softmax, so bfloat16 mixed precision on a TPU still
gives float32 scores. Built with tf-keras (Keras 2 API): Keras 3 cannot train under
MultiWorkerMirroredStrategy or with steps_per_execution under MirroredStrategy (measured).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Mapping, NamedTuple, Optional, Tuple

from models import pretrained

if TYPE_CHECKING:  # for the annotations only
    import tf_keras as keras

# tf_keras (and TensorFlow with it) is imported by the functions that build, not here: the registry's facts (names,
# sizes, options) answer a refused option without loading TensorFlow.


class _Entry(NamedTuple):
    builder: Callable[..., "keras.Model"]
    default_size: int  # image size used when the user gives none
    min_size: int  # smallest size the architecture accepts
    options: Tuple[str, ...]  # keyword options the builder takes; anything else is refused, not dropped
    pretrained_base: bool = True  # a Keras application base with ImageNet weights (--weights imagenet, --frozen-epochs)
    choices: Mapping[str, Tuple[float, ...]] = {}  # options that are switches: the only values they take
    first_layers: str = "Rescaling(1/127.5, offset=-1)"  # what the model does to raw pixels first (the manifest says)


def preprocess(inputs):
    # Raw pixels 0..255 -> [-1, 1], inside the model so every runtime gets it for free.
    import tf_keras as keras

    return keras.layers.Rescaling(1.0 / 127.5, offset=-1.0, name="preprocess")(inputs)


def _classifier_head(features, num_classes: int, dropout: float):
    import tf_keras as keras

    x = keras.layers.GlobalAveragePooling2D(name="pool")(features)
    if dropout:
        x = keras.layers.Dropout(dropout, name="dropout")(x)
    x = keras.layers.Dense(num_classes, name="logits")(x)
    # float32 softmax: scores stay float32 under mixed precision.
    return keras.layers.Activation("softmax", dtype="float32", name="scores")(x)


def _small_cnn(inputs, num_classes: int, imagenet: bool, width: int = 16, dropout: float = 0.1, flatten: float = 0):
    """Three conv blocks: fast enough for tests and CPU runs, and every op maps to the Edge TPU. flatten=1: the last
    block's map is flattened into the classifier instead of averaged, so it keeps where each stroke is (digits, 8x8
    enlarged to 32x32: 0.9818 held-out against 0.9401 averaged, same 10 epochs; bench/results/digits_demo.md)."""
    import tf_keras as keras

    x = preprocess(inputs)
    for i, filters in enumerate((width, width * 2, width * 4)):
        x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu", name=f"conv{i}")(x)
        if i < 2:
            # Separate pooling layer: the Edge TPU refuses pooling with a fused activation.
            x = keras.layers.MaxPooling2D(2, name=f"pool{i}")(x)
    if flatten:
        x = keras.layers.Flatten(name="flatten")(x)
        if dropout:
            x = keras.layers.Dropout(dropout, name="dropout")(x)
        x = keras.layers.Dense(num_classes, name="logits")(x)
        return keras.layers.Activation("softmax", dtype="float32", name="scores")(x)
    return _classifier_head(x, num_classes, dropout)


def _mobilenet_v2(inputs, num_classes: int, imagenet: bool, alpha: float = 1.0, dropout: float = 0.2):
    """MobileNetV2, the Edge TPU's reference network, without its ImageNet top."""
    import tf_keras as keras

    base = keras.applications.MobileNetV2(
        input_shape=tuple(inputs.shape[1:]), alpha=alpha, include_top=False, weights=keras_weights(imagenet)
    )
    return _classifier_head(base(preprocess(inputs)), num_classes, dropout), base


def _mobilenet_v3(kind: str):
    """MobileNetV3 Small or Large. minimalistic=1 (the default): Keras' minimalistic variant, ReLU and 3x3
    kernels, no hard-swish and no squeeze-excite (Keras' MobileNetV3 docs), every op on the Edge TPU
    (tests/pipeline/test_compile.py). minimalistic=0: the full variant, hard-swish and squeeze-excite, for a CPU
    board: the Edge TPU has no HARD_SWISH, so the compiler leaves the rest of the model on the CPU."""

    def builder(inputs, num_classes: int, imagenet: bool, dropout: float = 0.2, minimalistic: float = 1):
        import tf_keras as keras

        application = keras.applications.MobileNetV3Small if kind == "small" else keras.applications.MobileNetV3Large
        # include_preprocessing=False: our own Rescaling layer is the model's first, as in every model.
        # Keras picks the ImageNet file of the variant asked for (minimalistic or not).
        base = application(input_shape=tuple(inputs.shape[1:]), include_top=False, weights=keras_weights(imagenet),
                           minimalistic=bool(minimalistic), include_preprocessing=False)
        return _classifier_head(base(preprocess(inputs)), num_classes, dropout), base

    builder.__doc__ = _mobilenet_v3.__doc__
    return builder


def _efficientnet_b0(inputs, num_classes: int, imagenet: bool, dropout: float = 0.2):
    """EfficientNetB0, Keras' application: swish activations and squeeze-excite blocks (a sigmoid gate
    multiplied into each block's channels)."""
    # The base gets raw pixels, not preprocess(): Keras' EfficientNet starts with its own Rescaling(1/255)
    # and Normalization (ImageNet's mean and variance, loaded with its weights), the input its ImageNet
    # weights were trained behind; [-1, 1] would reach them as a near-constant image. Those layers are the
    # model's first, in place of preprocess(); the int8 export only needs the model to take raw pixels.
    import tf_keras as keras

    base = keras.applications.EfficientNetB0(input_shape=tuple(inputs.shape[1:]), include_top=False,
                                             weights=keras_weights(imagenet))
    return _classifier_head(base(inputs), num_classes, dropout), base


def _xception(inputs, num_classes: int, imagenet: bool, dropout: float = 0.2):
    """Xception, the Kaggle TPU flowers tutorial's choice."""
    import tf_keras as keras

    base = keras.applications.Xception(input_shape=tuple(inputs.shape[1:]), include_top=False,
                                       weights=keras_weights(imagenet))
    return _classifier_head(base(preprocess(inputs)), num_classes, dropout), base


def keras_weights(imagenet: bool):
    return pretrained.IMAGENET if imagenet else None


_SWITCH = (0, 1)  # an option that is a switch, as a number (model options are numbers in a config file)

_REGISTRY: Dict[str, _Entry] = {
    "small_cnn": _Entry(_small_cnn, default_size=32, min_size=8, options=("width", "dropout", "flatten"), pretrained_base=False,
                        choices={"flatten": _SWITCH}),
    "mobilenet_v2": _Entry(_mobilenet_v2, default_size=224, min_size=32, options=("alpha", "dropout")),
    "mobilenet_v3_small": _Entry(_mobilenet_v3("small"), default_size=224, min_size=32, options=("dropout", "minimalistic"),
                                 choices={"minimalistic": _SWITCH}),
    "mobilenet_v3_large": _Entry(_mobilenet_v3("large"), default_size=224, min_size=32, options=("dropout", "minimalistic"),
                                 choices={"minimalistic": _SWITCH}),
    "efficientnet_b0": _Entry(_efficientnet_b0, default_size=224, min_size=32, options=("dropout",),
                              first_layers="Keras EfficientNet's Rescaling(1/255) and Normalization (ImageNet mean and std with ImageNet weights)"),
    "xception": _Entry(_xception, default_size=299, min_size=71, options=("dropout",)),
}
MODEL_NAMES = tuple(_REGISTRY)


def _entry(name: str) -> _Entry:
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; expected one of {', '.join(MODEL_NAMES)}")
    return _REGISTRY[name]


def default_image_size(name: str) -> int:
    return _entry(name).default_size


def min_image_size(name: str) -> int:
    return _entry(name).min_size


def model_options(name: str) -> Tuple[str, ...]:
    """The options model `name` takes (e.g. ('alpha', 'dropout') for mobilenet_v2)."""
    return _entry(name).options


def in_model_preprocessing(name: str) -> str:
    """How model `name` turns the raw RGB pixels 0..255 it takes into its first layer's input, in words."""
    return f"{_entry(name).first_layers}: the model takes raw RGB pixels 0..255"


def has_base(name: str) -> bool:
    """Whether model `name` is a base network plus a head (what --frozen-epochs freezes)."""
    return _entry(name).pretrained_base


def check_options(name: str, options: Mapping[str, object]) -> None:
    """Refuse options model `name` does not take, naming the ones it does, and values they do not take (ValueError)."""
    entry = _entry(name)
    taken = entry.options
    unknown = sorted(set(options) - set(taken))
    if unknown:
        raise ValueError(
            f"model {name} does not take option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(taken) if taken else 'no options'}"
        )
    for key, value in options.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"model option {key}={value!r} for {name}, expected a number")
        allowed = entry.choices.get(key)
        if allowed is not None and value not in allowed:
            raise ValueError(f"model option {key}={value!r} for {name}, expected {' or '.join(map(str, allowed))}")


def check_weights_file(path) -> Path:
    """Refuse a weights file that is missing (FileNotFoundError) or not HDF5 (ValueError), naming it."""
    import h5py  # a dependency of tf-keras

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file {path} not found; expected a local Keras weights file (.h5)")
    try:
        is_hdf5 = h5py.is_hdf5(str(path))
    except OSError as err:
        raise ValueError(f"weights file {path} cannot be read ({err})") from err
    if not is_hdf5:
        with open(path, "rb") as f:
            head = f.read(8)
        raise ValueError(
            f"weights file {path} is not an HDF5 file (it starts with {head!r}); expected Keras weights "
            "written by model.save_weights('....h5') (for mobilenet_v2/xception: the base network's include_top=False weights)"
        )
    return path


class Built(NamedTuple):
    model: "keras.Model"
    base: Optional["keras.Model"]  # the pretrained-able base network inside `model`; None for small_cnn
    weights: Optional[Dict[str, Optional[str]]]  # source, path, url, sha256 of the starting weights; None = random


def build(name: str, num_classes: int, image_size: Optional[int] = None, weights=None, **options) -> "keras.Model":
    """Build model `name` (see build_recorded), without the record of its weights."""
    return build_recorded(name, num_classes, image_size, weights, **options).model


def build_recorded(
    name: str,
    num_classes: int,
    image_size: Optional[int] = None,
    weights=None,
    **options,
) -> Built:
    """Build model `name` for `num_classes` classes on square RGB images of `image_size` pixels.

    `weights`: 'imagenet' loads Keras' ImageNet weights into the base network through Keras' own
    loader (downloaded once into ~/.keras/models); a path is a local weights file: for the
    application networks, the base network's weights (Keras `include_top=False` files) for
    transfer learning; for small_cnn, the whole model's. `options` go to the builder (e.g.
    alpha=0.35 for mobilenet_v2).
    """
    entry = _entry(name)
    check_options(name, options)
    size = image_size or entry.default_size
    if size < entry.min_size:
        raise ValueError(f"image size {size} is too small for {name}; expected at least {entry.min_size}")
    if num_classes < 2:
        raise ValueError(f"num_classes {num_classes}, expected at least 2")
    imagenet = weights == pretrained.IMAGENET
    if imagenet and not entry.pretrained_base:
        raise ValueError(f"{name} has no ImageNet weights; expected a local weights file, or one of "
                         f"{', '.join(n for n, e in _REGISTRY.items() if e.pretrained_base)}")
    import tf_keras as keras

    inputs = keras.Input(shape=(size, size, 3), name="image")
    with pretrained.keras_downloads() as fetched:
        built = entry.builder(inputs, num_classes, imagenet, **options)
    outputs, base = built if isinstance(built, tuple) else (built, None)
    model = keras.Model(inputs, outputs, name=name)
    if weights is not None and not imagenet:
        weights = check_weights_file(weights)
        target = base or model
        try:
            target.load_weights(str(weights))
        except (ValueError, OSError, KeyError) as err:  # h5py and Keras report a mismatch in these three ways
            first = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
            raise ValueError(f"weights file {weights} does not fit {name} ({'base network' if base else 'whole model'}) "
                             f"at image size {size}: {first}") from err
    return Built(model, base, pretrained.record(weights, fetched))
