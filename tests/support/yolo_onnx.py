"""A small ONNX detector with Ultralytics' head and decoding tail (written with onnx's own helpers, random weights), for
the tests of `pipeline import --task detect` that need no Ultralytics: per stride 8, 16, 32 a last convolution of 64
box-distribution channels and one of C class logits, then the tail Ultralytics' format=onnx writes (reshapes and
concatenations over the levels, the DFL's softmax and fixed 1x1 convolution, box arithmetic, a sigmoid on the logits)
ending in one output (1, 4 + C, N)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

STRIDES = (8, 16, 32)


def yolo_onnx(path: Path, size: int = 64, classes: int = 3, sigmoid: bool = True, names=None) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def conv(x, out, cin, cout, k, stride, act=True):
        w = const(f"{out}_w", rng.normal(0, 0.3, (cout, cin, k, k)).astype(np.float32))
        b = const(f"{out}_b", np.zeros(cout, np.float32))
        y = out if not act else f"{out}_pre"
        nodes.append(helper.make_node("Conv", [x, w, b], [y], strides=[stride, stride], pads=[k // 2] * 4, name=f"{out}_conv"))
        if act:
            nodes.append(helper.make_node("Relu", [y], [out], name=f"{out}_relu"))
        return out

    x = conv("images", "s2", 3, 8, 3, 2)
    x = conv(x, "s4", 8, 8, 3, 2)
    boxes, logits, n = [], [], 0
    for stride in STRIDES:
        x = conv(x, f"s{stride}", 8, 8, 3, 2)
        cells = (size // stride) ** 2
        n += cells
        box = conv(conv(x, f"box{stride}_a", 8, 8, 3, 1), f"box{stride}", 8, 64, 1, 1, act=False)
        cls = conv(conv(x, f"cls{stride}_a", 8, 8, 3, 1), f"cls{stride}", 8, classes, 1, 1, act=False)
        shape_b = const(f"rb{stride}", np.array([1, 64, cells], np.int64))
        shape_c = const(f"rc{stride}", np.array([1, classes, cells], np.int64))
        nodes.append(helper.make_node("Reshape", [box, shape_b], [f"fb{stride}"], name=f"fb{stride}"))
        nodes.append(helper.make_node("Reshape", [cls, shape_c], [f"fc{stride}"], name=f"fc{stride}"))
        boxes.append(f"fb{stride}")
        logits.append(f"fc{stride}")
    nodes.append(helper.make_node("Concat", boxes, ["box_all"], axis=-1, name="box_all"))
    nodes.append(helper.make_node("Concat", logits, ["cls_all"], axis=-1, name="cls_all"))
    nodes.append(helper.make_node("Reshape", ["box_all", const("r4", np.array([1, 4, 16, n], np.int64))], ["dfl_r"], name="dfl_r"))
    nodes.append(helper.make_node("Transpose", ["dfl_r"], ["dfl_t"], perm=[0, 2, 1, 3], name="dfl_t"))
    nodes.append(helper.make_node("Softmax", ["dfl_t"], ["dfl_s"], axis=1, name="dfl_s"))
    dfl = const("dfl_w", np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1))
    nodes.append(helper.make_node("Conv", ["dfl_s", dfl], ["dfl_c"], name="dfl_conv"))
    nodes.append(helper.make_node("Reshape", ["dfl_c", const("r3", np.array([1, 4, n], np.int64))], ["dist"], name="dist"))
    nodes.append(helper.make_node("Mul", ["dist", const("strides", np.float32(8.0))], ["xywh"], name="xywh"))
    scores = "cls_all"
    if sigmoid:
        nodes.append(helper.make_node("Sigmoid", ["cls_all"], ["scores"], name="scores"))
        scores = "scores"
    nodes.append(helper.make_node("Concat", ["xywh", scores], ["output0"], axis=1, name="output0"))
    graph = helper.make_graph(nodes, "yolo_like", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + classes, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    meta = {"author": "Ultralytics", "task": "detect", "imgsz": f"[{size}, {size}]"}
    if names is not None:
        meta["names"] = repr(dict(enumerate(names)))
    for k, v in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
