"""Weight edits on a copy of the float Keras model before int8 conversion: cross-layer equalization and bias correction.

Both act where per-tensor int8 weights lose most: a depthwise convolution whose channels (after the converter
folds BatchNorm into them) span very different ranges shares one scale, so its small channels round to a few
steps. The edits run on a flat copy of RUN's Keras model (pipeline/quant/flatten.py) and never change the run.

- `equalize`: for each depthwise conv -> [BatchNorm] -> [ReLU/ReLU6] -> 1x1 conv chain, channel c of the depthwise
  output is divided by s_c and the 1x1 conv's input channel c multiplied by s_c, s_c = sqrt(r1_c / r2_c) (r1, r2 the
  channel's folded weight ranges), so both ranges become sqrt(r1_c * r2_c). ReLU is positively homogeneous, so
  this keeps the float function exactly. ReLU6 is not: s * ReLU6(y / s) = min(max(y, 0), 6 s), which equals
  ReLU6(y) only while y stays below 6 min(s, 1). A channel that reaches 6 on the calibration images keeps s = 1,
  and a smaller s is raised to max(y)/6: the float function is then kept exactly on the calibration images, and
  on new images as long as their activations stay under the same caps.
- `correct_bias`: the expected output shift that weight rounding causes, E[(Q(W) - W) x], computed from the
  float model's mean input per channel on the calibration images and the weights quantized as the converter
  quantizes them (symmetric int8, per tensor or per output channel), is subtracted from the layer's bias (or the
  BatchNorm's beta that the converter folds into it). It changes the float function on purpose.
- `ranges`: each activation tensor the converter quantizes on its own (ReLU/ReLU6 outputs, the outputs of convs
  and BatchNorms no activation follows, residual adds, the pool, the logits) gets the range that minimises its
  int8 error (rounding plus clipping, mean squared, on the calibration images) among percentile ranges from
  the full min..max down to the 99th percentile, pinned by a FakeQuant op behind the layer, which the converter
  takes as that tensor's quantization (as pipeline/quant/convention.py pins the input). Calibration's min..max
  lets one rare extreme stretch every step of a tensor; this trades that extreme's clipping for finer steps
  where the values are.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # the models are tf-keras models

from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import tf_keras as keras

EDITS = ("equalize", "bias", "ranges")
BATCH = 32  # calibration images per float pass


class Chain(NamedTuple):
    depthwise: "keras.layers.Layer"
    norm: Optional["keras.layers.Layer"]  # the BatchNorm the converter folds into the depthwise conv
    cap: Optional[float]  # the activation's upper bound (6 for ReLU6), None for ReLU or none
    pointwise: "keras.layers.Layer"  # the 1x1 conv that takes the depthwise output
    pointwise_norm: Optional["keras.layers.Layer"]


def apply(model: "keras.Model", edits: Sequence[str], calibration: np.ndarray, per_tensor: bool) -> "keras.Model":
    """A flat copy of `model` with `edits` applied in order; `calibration` are raw uint8 images [n,S,S,3]."""
    from pipeline.quant.flatten import flatten

    unknown = [e for e in edits if e not in EDITS]
    assert not unknown, f"unknown float edits {unknown}"  # the ladder names them; a user never does
    flat = flatten(model)
    images = calibration.astype(np.float32)
    for edit in edits:
        if edit == "equalize":
            equalize(flat, images)
        elif edit == "bias":
            correct_bias(flat, images, per_tensor)
        else:
            flat = pin_ranges(flat, images)
    return flat


# --- the graph ------------------------------------------------------------------------------------------------


def _consumers(model: "keras.Model") -> Dict[str, List["keras.layers.Layer"]]:
    out: Dict[str, List] = {layer.name: [] for layer in model.layers}
    for layer in model.layers:
        for node in layer._inbound_nodes:
            for parent in _flat(node.inbound_layers):
                out.setdefault(parent.name, []).append(layer)
    return out


def _flat(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _only(consumers, layer):
    following = consumers.get(layer.name, [])
    return following[0] if len(following) == 1 else None


def _activation_cap(layer) -> Optional[float]:
    """The upper bound of a ReLU-family layer (inf for plain ReLU); None when the layer is not one."""
    if isinstance(layer, keras.layers.ReLU):
        if float(layer.negative_slope) != 0.0 or float(layer.threshold) != 0.0:
            return None
        return float("inf") if layer.max_value is None else float(layer.max_value)
    if isinstance(layer, keras.layers.Activation):
        name = getattr(layer.activation, "__name__", "")
        return {"relu": float("inf"), "relu6": 6.0}.get(name)
    return None


def chains(model: "keras.Model") -> List[Chain]:
    """Every depthwise conv (multiplier 1) whose output, through at most a BatchNorm and a ReLU/ReLU6, feeds only a
    1x1 conv: the depthwise-separable pairs equalization may rescale."""
    consumers, found = _consumers(model), []
    for layer in model.layers:
        if not isinstance(layer, keras.layers.DepthwiseConv2D) or layer.depth_multiplier != 1 or layer.activation.__name__ != "linear":
            continue
        nxt, norm, cap = _only(consumers, layer), None, None
        if isinstance(nxt, keras.layers.BatchNormalization):
            norm, nxt = nxt, _only(consumers, nxt)
        if nxt is not None and _activation_cap(nxt) is not None:
            cap, nxt = _activation_cap(nxt), _only(consumers, nxt)
        if (isinstance(nxt, keras.layers.Conv2D) and not isinstance(nxt, keras.layers.DepthwiseConv2D)
                and tuple(nxt.kernel_size) == (1, 1) and nxt.groups == 1):
            following = _only(consumers, nxt)
            pw_norm = following if isinstance(following, keras.layers.BatchNormalization) else None
            found.append(Chain(layer, norm, cap, nxt, pw_norm))
    return found


def _norm_scale(norm) -> np.ndarray:
    """BatchNorm's per-channel multiplier gamma / sqrt(var + eps), which the converter folds into the conv before it."""
    gamma = norm.gamma.numpy() if norm.scale else np.ones(norm.moving_variance.shape, np.float32)
    return gamma / np.sqrt(norm.moving_variance.numpy() + norm.epsilon)


def _outputs(model: "keras.Model", tensors: list, images: np.ndarray, reduce) -> List[np.ndarray]:
    """`reduce` (max or mean over all but the channel axis) of each tensor over `images`, in batches."""
    probe = keras.Model(model.inputs, tensors)
    parts: List[List[np.ndarray]] = [[] for _ in tensors]
    counts = []
    for i in range(0, len(images), BATCH):
        values = probe(images[i:i + BATCH], training=False)
        values = values if isinstance(values, (list, tuple)) else [values]
        for j, v in enumerate(values):
            v = v.numpy().reshape(-1, v.shape[-1])
            parts[j].append(v.max(0) if reduce == "max" else v.sum(0))
        counts.append(min(BATCH, len(images) - i))
    if reduce == "max":
        return [np.max(p, axis=0) for p in parts]
    # The mean per position: each batch's sum divided by all positions seen.
    return [np.sum(p, axis=0) / (sum(counts) * int(np.prod(t.shape[1:-1]))) for p, t in zip(parts, tensors)]


# --- cross-layer equalization -------------------------------------------------------------------------------------


def equalize(model: "keras.Model", images: np.ndarray) -> int:
    """Equalize every depthwise-separable chain of `model` in place; returns how many channels were rescaled."""
    found = chains(model)
    if not found:
        return 0
    capped = [c for c in found if c.cap is not None and np.isfinite(c.cap)]
    # The activation's input, before the cap: what the cap would clip.
    peaks = dict(zip((c.depthwise.name for c in capped),
                     _outputs(model, [(c.norm or c.depthwise).output for c in capped], images, "max"))) if capped else {}
    rescaled = 0
    for c in found:
        dw = c.depthwise.depthwise_kernel.numpy()  # [kh, kw, C, 1]
        fold1 = _norm_scale(c.norm) if c.norm is not None else np.ones(dw.shape[2], np.float32)
        r1 = np.abs(dw[:, :, :, 0]).max((0, 1)) * np.abs(fold1)
        pw = c.pointwise.kernel.numpy()  # [1, 1, C, O]
        fold2 = _norm_scale(c.pointwise_norm) if c.pointwise_norm is not None else np.ones(pw.shape[3], np.float32)
        r2 = np.abs(pw[0, 0] * fold2[None, :]).max(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.sqrt(r1 / r2)
        s = np.where(np.isfinite(s) & (s > 0), s, 1.0)
        if c.depthwise.name in peaks:
            peak = peaks[c.depthwise.name]
            s = np.where(peak >= c.cap, 1.0, np.maximum(s, peak / c.cap))  # keep ReLU6's cap where it clips
        s = s.astype(np.float32)
        if c.norm is not None:
            if c.norm.scale:
                c.norm.gamma.assign(c.norm.gamma.numpy() / s)
            c.norm.beta.assign(c.norm.beta.numpy() / s)
        else:
            c.depthwise.depthwise_kernel.assign(dw / s[None, None, :, None])
            if c.depthwise.use_bias:
                c.depthwise.bias.assign(c.depthwise.bias.numpy() / s)
        c.pointwise.kernel.assign(pw * s[None, None, :, None])
        rescaled += int((s != 1.0).sum())
    return rescaled


# --- bias correction -------------------------------------------------------------------------------------------------


def _quantization_error(kernel: np.ndarray, channel_axis: int, per_tensor: bool) -> np.ndarray:
    """Q(W) - W with symmetric int8 weights in [-127, 127], as the TFLite converter quantizes them."""
    if per_tensor:
        scale = np.abs(kernel).max() / 127.0
    else:
        axes = tuple(a for a in range(kernel.ndim) if a != channel_axis)
        shape = [1] * kernel.ndim
        shape[channel_axis] = kernel.shape[channel_axis]
        scale = (np.abs(kernel).max(axes) / 127.0).reshape(shape)
    scale = np.where(scale > 0, scale, 1.0)
    return np.clip(np.round(kernel / scale), -127, 127) * scale - kernel


def correct_bias(model: "keras.Model", images: np.ndarray, per_tensor: bool) -> int:
    """Subtract each conv/dense layer's expected weight-rounding shift from its bias; returns how many layers."""
    consumers = _consumers(model)
    targets = []
    for layer in model.layers:
        if not isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense)):
            continue
        if isinstance(layer, keras.layers.DepthwiseConv2D) and layer.depth_multiplier != 1:
            continue
        nxt = _only(consumers, layer)
        norm = nxt if isinstance(nxt, keras.layers.BatchNormalization) and layer.activation.__name__ == "linear" else None
        if (norm is None and not layer.use_bias) or (norm is not None and not norm.center):
            continue  # nowhere to put a correction
        targets.append((layer, norm))
    if not targets:
        return 0
    means = _outputs(model, [layer.input for layer, _ in targets], images, "mean")
    for (layer, norm), mean in zip(targets, means):
        if isinstance(layer, keras.layers.DepthwiseConv2D):
            kernel = layer.depthwise_kernel.numpy()[:, :, :, 0]  # [kh, kw, C]
            fold = _norm_scale(norm) if norm is not None else np.ones(kernel.shape[-1], np.float32)
            error = _quantization_error(kernel * fold, 2, per_tensor)
            shift = (error * mean[None, None, :]).sum((0, 1))
        else:
            kernel = layer.kernel.numpy()  # Conv2D [kh, kw, C, O], Dense [C, O]
            fold = _norm_scale(norm) if norm is not None else np.ones(kernel.shape[-1], np.float32)
            error = _quantization_error(kernel * fold, kernel.ndim - 1, per_tensor)
            shift = np.tensordot(mean, error.sum(tuple(range(kernel.ndim - 2))), axes=(0, 0))
        if norm is not None:
            norm.beta.assign(norm.beta.numpy() - shift.astype(np.float32))
        else:
            layer.bias.assign(layer.bias.numpy() - shift.astype(np.float32))
    return len(targets)


# --- activation ranges that minimise int8 error ------------------------------------------------------------------

RANGE_SAMPLES = 20000  # values of each tensor kept per batch of calibration images to choose its range from
PERCENTILES = (100.0, 99.999, 99.99, 99.95, 99.9, 99.8, 99.5, 99.0)  # the candidate ranges' ends, per side


def range_targets(model: "keras.Model") -> List["keras.layers.Layer"]:
    """The layers whose output the converter quantizes as a tensor of its own: a conv/dense/BatchNorm/add output
    that no BatchNorm or ReLU-family activation is fused into, a ReLU/ReLU6, the global pool."""
    consumers, found = _consumers(model), []
    for layer in model.layers:
        nxt = _only(consumers, layer)
        fused = nxt is not None and (_activation_cap(nxt) is not None or (
            isinstance(nxt, keras.layers.BatchNormalization) and not isinstance(layer, keras.layers.BatchNormalization)))
        if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense)):
            fused = fused or layer.activation.__name__ != "linear"
        elif isinstance(layer, (keras.layers.BatchNormalization, keras.layers.Add)):
            pass
        elif _activation_cap(layer) is not None or isinstance(layer, keras.layers.GlobalAveragePooling2D):
            fused = False
        else:
            continue
        if not fused and consumers.get(layer.name):
            found.append(layer)
    return found


def int8_error(values: np.ndarray, low: float, high: float) -> float:
    """Mean squared error of `values` quantized to 256 levels over [low, high] (clipped outside it)."""
    step = (high - low) / 255.0 if high > low else 1.0
    return float(np.mean((np.clip(np.round((values - low) / step), 0, 255) * step + low - values) ** 2))


def best_range(values: np.ndarray) -> tuple:
    """(low, high) among the percentile ranges of `values` with the smallest int8 error; always spanning 0."""
    best = None
    for pct in PERCENTILES:
        low, high = min(0.0, float(np.percentile(values, 100.0 - pct))), max(0.0, float(np.percentile(values, pct)))
        if high - low <= 0:
            continue
        error = int8_error(values, low, high)
        if best is None or error < best[0]:
            best = (error, low, high)
    return (best[1], best[2]) if best else (0.0, 1.0)


def pin_ranges(model: "keras.Model", images: np.ndarray, seed: int = 0) -> "keras.Model":
    """`model` with a FakeQuant op behind each `range_targets` layer at its `best_range` on `images`."""
    import tensorflow as tf

    from pipeline.quant.flatten import rebuilt

    targets = range_targets(model)
    if not targets:
        return model
    probe = keras.Model(model.inputs, [layer.output for layer in targets])
    rng = np.random.default_rng(seed)
    kept: List[List[np.ndarray]] = [[] for _ in targets]
    for i in range(0, len(images), BATCH):
        values = probe(images[i:i + BATCH], training=False)
        values = values if isinstance(values, (list, tuple)) else [values]
        for j, v in enumerate(values):
            flat = v.numpy().ravel()
            # Every extreme, and a sample of the rest: the ranges' ends need the first, the error the second.
            sample = flat if flat.size <= RANGE_SAMPLES else flat[rng.integers(0, flat.size, RANGE_SAMPLES)]
            kept[j].append(np.concatenate([sample, [flat.min(), flat.max()]]))
    ranges = {layer.name: best_range(np.concatenate(parts)) for layer, parts in zip(targets, kept)}

    def pinned(layer, outputs):
        if layer.name not in ranges:
            return outputs
        low, high = ranges[layer.name]
        return keras.layers.Lambda(lambda x, lo=low, hi=high: tf.quantization.fake_quant_with_min_max_args(x, min=lo, max=hi, num_bits=8),
                                   name=f"{layer.name}_range")(outputs)

    return rebuilt(model, pinned)
