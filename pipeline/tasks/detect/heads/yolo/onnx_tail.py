"""Where to cut an Ultralytics detector's ONNX graph (YOLOv8, v9, 11 as `format=onnx` writes them) so the imported model
ends in edgeflow's YOLO head layout: the raw per-level box distributions and class logits, before the decoding tail.

Ultralytics' graph ends in one output (1, 4 + C, N): per level (strides 8, 16, 32) a last convolution gives the box
distributions (1, 64, H/s, W/s) (4 sides x 16 DFL bins) and another the class logits (1, C, H/s, W/s); after them, in
the graph, the decoding tail: reshapes and concatenations over the levels, the DFL (softmax over the bins, then a fixed
1x1 convolution whose weights are the bin numbers 0..15), the anchor arithmetic to xywh, and a sigmoid on the logits.

Found by structure, not by node names: walking back from the output through every node, a path stops at the first
convolution it meets, except the DFL's fixed one. Those stopping convolutions are the head's last ones; the cut is
recognised when there are exactly six of them, three with 64 channels and three with C, one pair at each of the
input size / 8, / 16 and / 32, and the tail between them and the output holds the DFL's softmax and the sigmoid.
Anything else (a model already cut, a segmentation or pose head, an end-to-end head with NMS in the graph, another
family) is refused naming what was expected.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from edge.answers.heads.yolo import BOX_CHANNELS, REG_MAX, STRIDES  # the host decoding's layout, which the cut must give
from pipeline.errors import ConfigError
EXPECTED = ("an Ultralytics detector as format=onnx writes it (YOLOv8, v9, 11): one output (1, 4 + C, N) of decoded "
            "xywh boxes and sigmoid class scores, fed per stride 8, 16, 32 by a last convolution of 64 box-distribution "
            "channels (4 x 16 DFL bins) and one of C class logits")


class Cut(NamedTuple):
    """The head's last convolutions' outputs, stride by stride, and what they say of the model."""

    boxes: List[str]  # the (1, 64, H/s, W/s) tensors, strides 8, 16, 32
    logits: List[str]  # the (1, C, H/s, W/s) tensors
    num_classes: int
    image_size: int
    tail_ops: Dict[str, int]  # what the cut removes: op type -> count
    extra: List[str] = []  # a third branch's (1, E, H/s, W/s) tensors (find's extra_channels; a pose head's keypoints)

    def describe(self) -> str:
        ops = ", ".join(f"{n} {op}" for op, n in sorted(self.tail_ops.items()))
        return (f"cut before the decoding tail ({ops}) at the last convolutions of strides {', '.join(map(str, STRIDES))}: "
                f"box distributions (1, {BOX_CHANNELS}, H/s, W/s) and class logits (1, {self.num_classes}, H/s, W/s)")


def find(model, where: str, extra_channels: int = 0) -> Cut:
    """The cut of `model` (an onnx ModelProto with static shapes); ConfigError when its tail is not recognised.
    `extra_channels` E: the output is (1, 4 + C + E, N) and a third last convolution of E channels feeds it per stride."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = _shapes(inferred)
    graph = inferred.graph
    if len(graph.output) != 1:
        raise ConfigError(f"{where} has {len(graph.output)} outputs ({', '.join(o.name for o in graph.output)}); expected "
                          f"{EXPECTED}")
    out = graph.output[0].name
    out_shape = shapes.get(out)
    image = _input_size(graph, shapes, where)
    n = sum((image // s) ** 2 for s in STRIDES)
    if not out_shape or len(out_shape) != 3 or out_shape[0] != 1 or out_shape[2] != n or out_shape[1] <= 4 + extra_channels:
        rows = f"4 + C + {extra_channels}" if extra_channels else "4 + C"
        raise ConfigError(f"{where}: output {out!r} has shape {_shown(out_shape)}; expected (1, {rows}, {n}) for a "
                          f"{image}x{image} input, i.e. {EXPECTED}")
    num_classes = out_shape[1] - 4 - extra_channels
    producers = {o: node for node in graph.node for o in node.output}
    constants = _constants(graph)
    frontier, tail = [], []
    seen, todo = set(), [out]
    while todo:
        name = todo.pop()
        node = producers.get(name)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.op_type == "Conv" and not _is_dfl(node, constants):
            frontier.append(node.output[0])
            continue
        tail.append(node)
        todo.extend(i for i in node.input if i)
    ops = {op: sum(1 for node in tail if node.op_type == op) for op in sorted({node.op_type for node in tail})}
    missing = [what for what, ok in (("the DFL's Softmax", ops.get("Softmax")), ("a Sigmoid on the class logits",
                                     ops.get("Sigmoid"))) if not ok]
    if missing:
        raise ConfigError(f"{where}: the tail after the last convolutions lacks {' and '.join(missing)} "
                          f"({_listed(ops)}); expected {EXPECTED}")
    boxes = _per_stride(frontier, shapes, BOX_CHANNELS, image, where, "box-distribution")
    logits = _per_stride(frontier, shapes, num_classes, image, where, "class-logit")
    third = _per_stride(frontier, shapes, extra_channels, image, where, "third branch's") if extra_channels else []
    extra = sorted(set(frontier) - set(boxes) - set(logits) - set(third))
    if extra or num_classes == BOX_CHANNELS:
        what = (f"{num_classes} classes: the class logits would have the box distributions' {BOX_CHANNELS} channels, and a "
                "client tells the two outputs apart by shape" if num_classes == BOX_CHANNELS else
                f"more last convolutions than the head's six ({', '.join(f'{t} {_shown(shapes.get(t))}' for t in extra[:3])})")
        raise ConfigError(f"{where}: {what}; expected {EXPECTED}")
    return Cut(boxes, logits, num_classes, image, ops, third)


OUTPUT_NAMES = tuple(f"{kind}_s{s}" for kind in ("box", "logits") for s in STRIDES)  # the cut model's outputs, in order


def cut(model, found: Cut, path: Path, extra_name: str = "extra") -> None:
    """Write to `path` the model ending at the cut: six outputs named OUTPUT_NAMES (the boxes then the logits, strides
    ascending), then any third branch's as `extra_name`_s8..., each an Identity of a last convolution's output."""
    import onnx
    from onnx import helper
    from onnx.utils import Extractor

    inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    tensors = [*found.boxes, *found.logits, *found.extra]
    cut_model = Extractor(onnx.shape_inference.infer_shapes(model)).extract_model(inputs, tensors)
    graph = cut_model.graph
    kept = list(graph.output)
    del graph.output[:]
    for name, value in zip(OUTPUT_NAMES + tuple(f"{extra_name}_s{s}" for s in STRIDES), kept):
        graph.node.append(helper.make_node("Identity", [value.name], [name], name=f"edgeflow_{name}"))
        renamed = onnx.ValueInfoProto()
        renamed.CopyFrom(value)
        renamed.name = name
        graph.output.append(renamed)
    onnx.checker.check_model(cut_model)
    onnx.save(cut_model, str(path))


def _per_stride(frontier: Sequence[str], shapes, channels: int, image: int, where: str, what: str) -> List[str]:
    found = []
    for stride in STRIDES:
        grid = image // stride
        matches = [t for t in frontier if shapes.get(t) == [1, channels, grid, grid]]
        if len(matches) != 1:
            seen = ", ".join(f"{_shown(shapes.get(t))}" for t in frontier[:8]) or "none"
            raise ConfigError(f"{where}: {len(matches)} last convolutions give (1, {channels}, {grid}, {grid}), the "
                              f"{what} map at stride {stride} (the last convolutions found: {seen}); expected {EXPECTED}")
        found.append(matches[0])
    return found


def _is_dfl(node, constants: Dict[str, np.ndarray]) -> bool:
    """The DFL's fixed 1x1 convolution: REG_MAX channels in, one out, weights 0..REG_MAX-1 (the expected bin)."""
    weight = constants.get(node.input[1]) if len(node.input) > 1 else None
    return (weight is not None and weight.shape == (1, REG_MAX, 1, 1)
            and np.allclose(weight.ravel(), np.arange(REG_MAX, dtype=np.float32)))


def _constants(graph) -> Dict[str, np.ndarray]:
    from onnx import numpy_helper

    found = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            found[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return found


def _shapes(model) -> Dict[str, Optional[List[int]]]:
    shapes = {}
    for value in (*model.graph.input, *model.graph.value_info, *model.graph.output):
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return shapes


def _input_size(graph, shapes, where: str) -> int:
    initializers = {t.name for t in graph.initializer}
    (image,) = [i.name for i in graph.input if i.name not in initializers] or [None]
    shape = shapes.get(image) or []
    if len(shape) != 4 or shape[2] is None or shape[2] != shape[3] or shape[2] % max(STRIDES):
        raise ConfigError(f"{where}: input {image!r} has shape {_shown(shape)}; expected (1, 3, S, S) with S a multiple "
                          f"of {max(STRIDES)} (export with a fixed imgsz, dynamic=False)")
    return shape[2]


def _listed(ops: Dict[str, int]) -> str:
    return ", ".join(f"{n} {op}" for op, n in ops.items()) or "no ops"


def _shown(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")" if shape else "(unknown)"
