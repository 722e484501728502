"""Fine-tuning through the converter's own int8 model: an exact simulation of it, how chaotic its error is, and what
fine-tuning the weights (and the activation ranges) against the float logits gives once converted again.

    .venv/bin/python bench/remedy/int8_finetune.py RUN [--epochs 6] [--lr 1e-5] [--range-lr 0] [--views 8] [--eval-views 5]
        [--baseline RUN/model_int8.tflite] [--save OUT.tflite] [--skip-chaos] [--zero-anywhere]

1. Step 0: RUN's Keras model with the `ranges` rung's pinned ranges (pipeline/remedy/float_edits.py), calibrated as
   the ladder's rung calibrates (every training image outside the tuning split, seed + 1) and converted by the
   export's own converter. Its activation tensors' scales and zero points are read from the .tflite.
2. The simulation: the float graph with each conv/depthwise/dense folded with the BatchNorm behind it as the
   converter folds it, its weights rounded per output channel to [-127, 127] (max |w| / 127), and each tensor the
   converter quantizes (the fused ReLU6 outputs, the BatchNorm outputs no activation follows, the adds, the pool,
   the logits, the preprocessing's two tensors) rounded to the .tflite's own grid. Checked op by op (each simulated
   op fed the converter's own dequantized inputs: the share of its outputs a step off) and end to end (the logit
   error, below, of the simulation and of the converted model, and their difference).
3. Chaos: the simulation's logits when every weight moves by a relative 1e-6..1e-3, and when 1% of the pixels move
   by one grey level: how much of int8's error is a fixed function of the model a fine-tuning could learn away.
4. Fine-tuning: the folded weights and biases (and with --range-lr the activation ranges, LSQ-style, ReLU outputs'
   lower ends fixed at 0, each zero point kept an integer as the converter keeps it unless --zero-anywhere) trained by Adam to bring the simulation's centred logits to the float model's, on
   `--views` fresh seeded views (pipeline/remedy/tuning_split.py's `random_view`) of every training image outside
   the tuning split each epoch. The weights go back into the float model (the BatchNorm kept: its beta takes the
   bias, the kernel is divided by the fold), every simulated tensor's range is pinned at its grid, and the model is
   converted with the same calibration images: the converted model's grid is checked to be the simulated one.

The logit error: the root mean square of the int8 model's dequantized logits minus the float logits, each image's
mean removed (what softmax ignores); on held-out (read only to judge) and on `--eval-views` seeded views of each
training image that the fine-tuning never saw (another seed). Agreement and `remedy.near_ties` beside it. Prints
lines to paste; nothing in RUN changes.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

SIMULATED = ("conv", "depthwise", "dense")


def _inbound(layer):
    from pipeline.remedy import float_edits as fe

    return [parent.name for parent in fe._flat(layer._inbound_nodes[0].inbound_layers)]


def tensor_key(name: str) -> str:
    """The Keras layer a .tflite tensor's name comes from (the last layer of a fused group), or preprocess/OP."""
    parts = name.split(";")[0].split("/")
    return "/".join(parts[1:3]) if len(parts) > 2 and parts[1] == "preprocess" else (parts[1] if len(parts) > 1 else name)


def activation_tensors(model_bytes: bytes):
    """{key: (tensor index, scale, zero point)} of every int8 tensor an op of the .tflite writes, and its logits'."""
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_content=model_bytes)
    details = {d["index"]: d for d in interpreter.get_tensor_details()}
    found, logits = {}, None
    for op in interpreter._get_ops_details():
        if op["op_name"] == "SOFTMAX":
            logits = int(op["inputs"][0])
        for index in op["outputs"]:
            d = details[int(index)]
            if d["dtype"] == np.int8:
                scale, zero = d["quantization"]
                found[tensor_key(d["name"])] = (int(index), float(scale), int(zero))
    return found, logits


class Simulation:
    """The converter's int8 model in TensorFlow ops on float values, differentiable through straight-through rounding."""

    def __init__(self, flat, grid):
        import tensorflow as tf
        import tf_keras as keras

        from pipeline.remedy import float_edits as fe

        self.grid = dict(grid)  # key -> (scale, zero point)
        self.ranges = {}  # key -> (low, high) variables, when learned
        self.zero_on_grid = True
        self.steps, self.weights = [], []
        consumers, alias, done = fe._consumers(flat), {}, set()
        for layer in flat.layers:
            if layer.name in done:
                continue
            if isinstance(layer, keras.layers.InputLayer):
                self.steps.append(("input", layer.name, [], None))
                continue
            inputs = [alias.get(n, n) for n in _inbound(layer)]
            if isinstance(layer, keras.layers.Rescaling):
                self.steps.append(("rescale", layer.name, inputs, (float(layer.scale), float(layer.offset))))
            elif isinstance(layer, (keras.layers.Conv2D, keras.layers.DepthwiseConv2D, keras.layers.Dense)):
                group, nxt, norm, cap = [layer], fe._only(consumers, layer), None, None
                if isinstance(nxt, keras.layers.BatchNormalization):
                    norm, nxt = nxt, fe._only(consumers, nxt)
                    group.append(norm)
                if nxt is not None and fe._activation_cap(nxt) is not None:
                    cap = fe._activation_cap(nxt)
                    group.append(nxt)
                if getattr(layer, "activation", None) is not None and layer.activation.__name__ != "linear":
                    raise ValueError(f"{layer.name}: a fused {layer.activation.__name__} is not simulated")
                depthwise = isinstance(layer, keras.layers.DepthwiseConv2D)
                if depthwise and layer.depth_multiplier != 1:
                    raise ValueError(f"{layer.name}: depth multiplier {layer.depth_multiplier} is not simulated")
                kernel = (layer.depthwise_kernel if depthwise else layer.kernel).numpy()
                channels = kernel.shape[2] if depthwise else kernel.shape[-1]
                bias = layer.bias.numpy() if layer.use_bias else np.zeros(channels, np.float32)
                if norm is not None:  # folded as the converter folds it
                    fold = fe._norm_scale(norm)
                    bias = (bias - norm.moving_mean.numpy()) * fold + (norm.beta.numpy() if norm.center else 0.0)
                    kernel = kernel * (fold[None, None, :, None] if depthwise else fold)
                k, b = tf.Variable(kernel.astype(np.float32)), tf.Variable(bias.astype(np.float32))
                self.weights += [k, b]
                key = group[-1].name
                for member in group:
                    alias[member.name] = key
                    done.add(member.name)
                kind = "depthwise" if depthwise else "dense" if isinstance(layer, keras.layers.Dense) else "conv"
                self.steps.append((kind, key, inputs, dict(layer=layer, norm=norm, kernel=k, bias=b, cap=cap,
                                                           strides=getattr(layer, "strides", None), padding=getattr(layer, "padding", None))))
            elif isinstance(layer, keras.layers.ZeroPadding2D):
                self.steps.append(("pad", layer.name, inputs, layer.padding))
            elif isinstance(layer, keras.layers.Add):
                self.steps.append(("add", layer.name, inputs, None))
            elif isinstance(layer, keras.layers.GlobalAveragePooling2D):
                self.steps.append(("mean", layer.name, inputs, None))
            elif isinstance(layer, keras.layers.Dropout):
                alias[layer.name] = inputs[0]
            elif isinstance(layer, keras.layers.Activation) and layer.activation.__name__ == "softmax":
                self.logits = inputs[0]
            else:
                raise ValueError(f"{layer.name}: {type(layer).__name__} is not simulated")

    def learn_ranges(self) -> list:
        """The ranges of the simulated tensors behind convs, adds and the pool as variables; returns those trained."""
        import tensorflow as tf

        trained = []
        for kind, key, _, p in self.steps:
            if key not in self.grid or kind not in ("conv", "depthwise", "add", "mean"):
                continue
            scale, zero = self.grid[key]
            low = tf.Variable((-128 - zero) * scale, dtype=tf.float32)
            high = tf.Variable((127 - zero) * scale, dtype=tf.float32)
            self.ranges[key] = (low, high)
            fixed_low = kind == "mean" or (p is not None and p["cap"] is not None)  # ReLU outputs start at 0
            trained += [high] if fixed_low else [low, high]
        return trained

    def settle_ranges(self) -> None:
        """The learned ranges as the grid a FakeQuant op pinned at them gives (zero exactly on the grid)."""
        for key, (low, high) in self.ranges.items():
            low, high = float(low.numpy()), float(high.numpy())
            scale = (high - low) / 255.0
            self.grid[key] = (scale, int(np.clip(np.round(-low / scale), 0, 255)) - 128)
        self.ranges = {}

    def round(self, x, key):
        import tensorflow as tf

        if key in self.ranges:  # LSQ: the step's gradient carries the rounding residual, the ends the clipping
            low, high = self.ranges[key]
            scale = (high - low) / 255.0
            if self.zero_on_grid:  # the zero point an integer, as the converter will nudge it (its gradient: low's own)
                low = low - tf.stop_gradient(low + tf.clip_by_value(tf.round(-low / scale), 0.0, 255.0) * scale)
            v = tf.clip_by_value((x - low) / scale, 0.0, 255.0)
            return (v + tf.stop_gradient(tf.round(v) - v)) * scale + low
        if key not in self.grid:
            return x
        scale, zero = self.grid[key]
        return tf.quantization.fake_quant_with_min_max_args(x, min=(-128 - zero) * scale, max=(127 - zero) * scale, num_bits=8)

    @staticmethod
    def rounded_weights(kernel, axis: int):
        import tensorflow as tf

        axes = [a for a in range(len(kernel.shape)) if a != axis % len(kernel.shape)]
        scale = tf.stop_gradient(tf.maximum(tf.reduce_max(tf.abs(kernel), axis=axes, keepdims=True), 1e-12) / 127.0)
        return kernel + tf.stop_gradient(tf.clip_by_value(tf.round(kernel / scale), -127, 127) * scale - kernel)

    def __call__(self, x, feed=None):
        """The logits of images `x` (pixels 0..255); `feed` maps keys to tensors used instead of computed ones."""
        import tensorflow as tf

        t = dict(feed or {})
        for kind, key, inputs, p in self.steps:
            if key in t:
                continue
            if kind == "input":
                t[key] = x
                continue
            a = t[inputs[0]]
            if kind == "rescale":
                t[key] = self.round(self.round(a * p[0], "preprocess/mul") + p[1], "preprocess/add")
            elif kind in SIMULATED:
                strides = [1, *p["strides"], 1] if p["strides"] else None
                if kind == "conv":
                    v = tf.nn.conv2d(a, self.rounded_weights(p["kernel"], -1), strides, p["padding"].upper())
                elif kind == "depthwise":
                    v = tf.nn.depthwise_conv2d(a, self.rounded_weights(p["kernel"], 2), strides, p["padding"].upper())
                else:
                    v = tf.matmul(a, self.rounded_weights(p["kernel"], -1))
                v = v + p["bias"]
                if p["cap"] is not None:
                    v = tf.nn.relu(v) if not np.isfinite(p["cap"]) else tf.clip_by_value(v, 0.0, p["cap"])
                t[key] = self.round(v, key)
            elif kind == "pad":
                (top, bottom), (left, right) = p
                t[key] = tf.pad(a, [[0, 0], [top, bottom], [left, right], [0, 0]])
            elif kind == "add":
                t[key] = self.round(a + t[inputs[1]], key)
            elif kind == "mean":
                t[key] = self.round(tf.reduce_mean(a, axis=[1, 2]), key)
        self.tensors = t
        return t[self.logits]

    def write_back(self) -> None:
        """The trained folded weights into the float model's layers: the kernel unfolded, the bias into beta."""
        from pipeline.remedy import float_edits as fe

        for kind, _, _, p in self.steps:
            if kind not in SIMULATED:
                continue
            layer, norm = p["layer"], p["norm"]
            kernel, bias = p["kernel"].numpy(), p["bias"].numpy()
            if norm is not None:
                fold = fe._norm_scale(norm)
                own = layer.bias.numpy() if layer.use_bias else 0.0
                norm.beta.assign((bias - (own - norm.moving_mean.numpy()) * fold).astype(np.float32))
                kernel = kernel / (fold[None, None, :, None] if kind == "depthwise" else fold)
            elif layer.use_bias:
                layer.bias.assign(bias)
            (layer.depthwise_kernel if kind == "depthwise" else layer.kernel).assign(kernel.astype(np.float32))


def pinned(flat, grid):
    """`flat` with a FakeQuant op at its grid behind each layer the grid names (the `ranges` rung's mechanism)."""
    import tensorflow as tf
    import tf_keras as keras

    from pipeline.quant.flatten import rebuilt

    def pin(layer, outputs):
        if layer.name not in grid:
            return outputs
        scale, zero = grid[layer.name]
        low, high = (-128 - zero) * scale, (127 - zero) * scale
        return keras.layers.Lambda(lambda x, lo=low, hi=high: tf.quantization.fake_quant_with_min_max_args(x, min=lo, max=hi, num_bits=8),
                                   name=f"{layer.name}_range")(outputs)

    return rebuilt(flat, pin)


def centred_error(a: np.ndarray, b: np.ndarray) -> float:
    x = a - b
    x = x - x.mean(1, keepdims=True)
    return float(np.sqrt((x ** 2).mean()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr", type=float, default=1e-5, help="Adam's rate for the folded weights and biases")
    parser.add_argument("--range-lr", type=float, default=0.0, help="Adam's rate for the activation ranges (0: fixed)")
    parser.add_argument("--views", type=int, default=8, help="fresh views of each training image an epoch")
    parser.add_argument("--eval-views", type=int, default=5, help="views of each training image to judge on")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--zero-anywhere", action="store_true", help="learned ranges' zero points not kept integer while training")
    parser.add_argument("--skip-chaos", action="store_true")
    parser.add_argument("--baseline", type=Path, nargs="*", default=[], help=".tflite files of RUN to judge on the same sets")
    parser.add_argument("--save", type=Path, default=None, help="write the fine-tuned .tflite here")
    args = parser.parse_args()

    import tensorflow as tf
    import tf_keras as keras

    from edge.answers.classify import get_scores, set_input
    from pipeline import export
    from pipeline.data import load_split
    from pipeline.data.heldout import heldout_examples
    from pipeline.quant import convention
    from pipeline.remedy import float_edits, ladder as remedy, tuning_split
    from pipeline.quant.calibration import calibration_images
    from pipeline.quant.convert import Mode, convert, keras_function, make_converter
    from pipeline.quant.flatten import flatten
    from pipeline.rundir.run import Run
    from pipeline.tasks.classify.parity import _heldout_pixels

    start = time.monotonic()
    load = lambda: f"load {os.getloadavg()[0]:.1f}"  # noqa: E731
    run = Run.open(args.run)
    size = run.image_size
    tuning = tuning_split.tuning_split(run, 0)
    config = remedy.LADDER[[r.name for r in remedy.LADDER].index("ranges")].config(export.ExportConfig(mode=export.Mode.INT8), tuning)
    calibration = calibration_images(run, config, size)[0]
    images, _ = load_split(run, "train")
    if len(tuning.positions):
        images = images[np.setdiff1d(np.arange(len(images)), np.asarray(tuning.positions, np.int64))]
    rng = np.random.default_rng(1)
    eval_views = np.concatenate([np.stack([tuning_split.random_view(im, size, rng)[0] for im in images]) for _ in range(args.eval_views)])
    heldout, _ = _heldout_pixels(run, heldout_examples(run, None))
    flat = flatten(keras.models.load_model(str(run.artifact("keras_model")), compile=False))
    cut = keras.Model(flat.inputs, flat.get_layer(Simulation(flat, {}).logits).output)
    sets = {"held-out": heldout, "views": eval_views}
    floats = {name: cut.predict(x.astype(np.float32), batch_size=64, verbose=0) for name, x in sets.items()}
    norm = convention.contract(run.contract, int8=True).norm

    def converted(model) -> bytes:
        concrete, trackable = keras_function(model, size)
        concrete, wrapped = convention.wrap(concrete, calibration)
        return convert(make_converter(concrete, trackable, Mode.INT8, config, wrapped))

    def int8_logits(model_bytes: bytes, x: np.ndarray, keys=()):
        found, logits = activation_tensors(model_bytes)
        interpreter = tf.lite.Interpreter(model_content=model_bytes, experimental_preserve_all_tensors=bool(keys), num_threads=1)
        interpreter.allocate_tensors()
        wanted = [logits] + [found[k][0] for k in keys]
        out, scores = [[] for _ in wanted], []
        for image in x:
            set_input(interpreter, image, norm)
            interpreter.invoke()
            scores.append(get_scores(interpreter))
            for j, index in enumerate(wanted):
                q = interpreter.get_tensor(index).astype(np.float32)
                _, scale, zero = next(v for v in found.values() if v[0] == index)
                out[j].append((q - zero) * scale)
        return [np.concatenate(o) for o in out] + [np.stack(scores)]

    def judge(name: str, model_bytes: bytes, seconds: float) -> None:
        line = [f"{name} ({seconds:.0f} s, {load()})"]
        for set_name, x in sets.items():
            z, scores = int8_logits(model_bytes, x)
            ref = floats[set_name]
            reference = tf.nn.softmax(ref).numpy()
            off = int((scores.argmax(1) != reference.argmax(1)).sum())
            ties = remedy.near_ties(reference, scores)
            line.append(f"{set_name}: logit error {centred_error(z, ref):.3f}, agree {len(x) - off}/{len(x)}, "
                        f"noise {ties['noise']:.3f} ({ties['near_ties']} near ties)")
        print(" | ".join(line), flush=True)

    # 1. step 0: the ranges rung, converted
    t = time.monotonic()
    original = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    step0 = converted(float_edits.apply(original, config.float_edits, calibration, config.per_tensor))
    found, _ = activation_tensors(step0)
    grid = {k: (s, z) for k, (_, s, z) in found.items()}
    print(f"run {args.run}: {len(images)} training images outside the tuning split, {len(eval_views)} views to judge on, "
          f"{len(heldout)} held-out; {len(grid)} int8 activation tensors", flush=True)
    judge("step 0: the ranges rung, converted", step0, time.monotonic() - t)
    for path in args.baseline:
        judge(str(path), path.read_bytes(), 0.0)

    # 2. the simulation against the converter
    sim = Simulation(flat, grid)
    forward = tf.function(lambda x: sim(x))

    def simulated(x: np.ndarray) -> np.ndarray:
        return np.concatenate([forward(tf.constant(x[i:i + 64].astype(np.float32))).numpy() for i in range(0, len(x), 64)])

    for set_name, x in sets.items():
        z, _ = int8_logits(step0, x)
        s = simulated(x)
        print(f"simulation at step 0, {set_name}: logit error {centred_error(s, floats[set_name]):.3f} (converted "
              f"{centred_error(z, floats[set_name]):.3f}); simulation minus converted {centred_error(s, z):.3f}", flush=True)
    keys = list(grid)
    sample = heldout[:8]
    int8_out = dict(zip(keys, int8_logits(step0, sample, keys)[1:-1]))
    worst, shares, largest = (0.0, ""), [], 0.0
    x0 = tf.constant(sample.astype(np.float32))
    sim(x0)
    shapes = {k: v.shape for k, v in sim.tensors.items()}
    for kind, key, inputs, _ in sim.steps:
        if kind not in (*SIMULATED, "add", "mean") or key not in grid:
            continue
        feed = {}
        for name in inputs:
            source = next((st for st in sim.steps if st[1] == name), None)
            if source is not None and source[0] == "pad":  # the converter fuses the padding into the conv
                name = source[2][0]
            value = int8_out.get(name if name in grid else name + "/add")  # the Rescaling's output is preprocess/add
            if value is None:
                break
            feed[name] = tf.constant(value.reshape(shapes[name]))
        else:
            sim(x0, feed=feed)
            own = sim.tensors[key].numpy().reshape(len(sample), -1)
            steps = np.round((own - int8_out[key].reshape(len(sample), -1)) / grid[key][0])
            shares.append(float(np.mean(steps != 0)))
            largest = max(largest, float(np.abs(steps).max()))
            worst = max(worst, (shares[-1], key))
    print(f"op by op on {len(sample)} held-out images fed the converter's own inputs: {len(shares)} ops, a step off on "
          f"{np.mean(shares):.2%} of outputs on average (worst {worst[0]:.2%}, {worst[1]}; at most {largest:.0f} step)", flush=True)

    # 3. chaos
    if not args.skip_chaos:
        x = eval_views[:512]
        base, original = simulated(x), [v.numpy() for v in sim.weights]
        noise = np.random.default_rng(0)
        for eps in (1e-6, 1e-5, 1e-4, 1e-3):
            for v, o in zip(sim.weights, original):
                v.assign(o * (1 + eps * noise.standard_normal(o.shape)).astype(np.float32))
            moved = simulated(x)
            print(f"weights moved by a relative {eps:g}: simulation's logit error {centred_error(moved, floats['views'][:512]):.3f}, "
                  f"its logits moved by {centred_error(moved, base):.3f}", flush=True)
        for v, o in zip(sim.weights, original):
            v.assign(o)
        grey = np.clip(x.astype(np.float32) + (noise.random(x.shape) < 0.01) * noise.choice([-1.0, 1.0], x.shape), 0, 255)
        float_moved = cut.predict(grey, batch_size=64, verbose=0)
        print(f"1% of pixels one grey level off: float logits moved by {centred_error(float_moved, floats['views'][:512]):.3f}, "
              f"the simulation's by {centred_error(simulated(grey), base):.3f}", flush=True)

    # 4. fine-tuning
    t = time.monotonic()
    teacher_rng, order_rng = np.random.default_rng(1234), np.random.default_rng(0)
    ranges = sim.learn_ranges() if args.range_lr else []
    sim.zero_on_grid = not args.zero_anywhere
    optimizer, range_optimizer = keras.optimizers.Adam(args.lr), keras.optimizers.Adam(args.range_lr or 1e-3)

    @tf.function
    def step(x, target):
        with tf.GradientTape() as tape:
            z = sim(x)
            loss = tf.reduce_mean(tf.square(z - tf.reduce_mean(z, 1, keepdims=True) - target))
        grads = tape.gradient(loss, sim.weights + ranges)
        optimizer.apply_gradients(zip(grads[:len(sim.weights)], sim.weights))
        if ranges:
            range_optimizer.apply_gradients(zip(grads[len(sim.weights):], ranges))
        return loss

    forward = tf.function(lambda x: sim(x))
    print(f"epoch 0: simulation's logit error on the views {centred_error(simulated(eval_views), floats['views']):.3f}", flush=True)
    for epoch in range(args.epochs):
        views = np.concatenate([np.stack([tuning_split.random_view(im, size, teacher_rng)[0] for im in images]) for _ in range(args.views)])
        target = cut.predict(views.astype(np.float32), batch_size=64, verbose=0)
        target = target - target.mean(1, keepdims=True)
        order, losses = order_rng.permutation(len(views)), []
        for i in range(0, len(order) - args.batch + 1, args.batch):
            j = order[i:i + args.batch]
            losses.append(float(step(tf.constant(views[j].astype(np.float32)), tf.constant(target[j]))))
        print(f"epoch {epoch + 1}: training loss {np.mean(losses):.4f}, simulation's logit error on the views "
              f"{centred_error(simulated(eval_views), floats['views']):.3f} ({time.monotonic() - t:.0f} s, {load()})", flush=True)
    if ranges:
        before = dict(grid)
        sim.settle_ranges()
        widths = [sim.grid[k][0] / before[k][0] for k in before if k in sim.grid and sim.grid[k] != before[k]]
        print(f"ranges learned: {len(widths)} moved, width ratio {np.mean(widths) if widths else 1.0:.3f} on average "
              f"({min(widths, default=1.0):.3f}..{max(widths, default=1.0):.3f})", flush=True)
        forward = tf.function(lambda x: sim(x))
        print(f"simulation at the settled ranges: logit error on the views {centred_error(simulated(eval_views), floats['views']):.3f}", flush=True)
    sim.write_back()
    print(f"the fine-tuned float model against the original, views: logits moved by "
          f"{centred_error(cut.predict(eval_views[:512].astype(np.float32), batch_size=64, verbose=0), floats['views'][:512]):.3f}", flush=True)
    tuned = converted(pinned(flat, {key: sim.grid[key] for _, key, _, _ in sim.steps if key in sim.grid}))
    found, _ = activation_tensors(tuned)
    changed = [k for k, v in sim.grid.items() if k in found and (abs(found[k][1] - v[0]) > 1e-6 * v[0] or found[k][2] != v[1])]
    print(f"converted after fine-tuning: {len(changed)} tensors off the simulated grid {changed[:5]}", flush=True)
    judge(f"fine-tuned ({args.epochs} epochs x {args.views} views, lr {args.lr:g}, range lr {args.range_lr:g}), converted",
          tuned, time.monotonic() - t)
    if args.save:
        args.save.write_bytes(tuned)
    print(f"total {time.monotonic() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
