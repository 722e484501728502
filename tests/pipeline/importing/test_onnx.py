"""`pipeline import` of ONNX classifiers: a small CNN trained with PyTorch and exported by torch.onnx.export (NCHW,
ImageNet mean/std) imports through onnx2tf, its int8 model is within 1 pp of onnxruntime's top-1 on the held-out
images with every op predicted on the Edge TPU and no TRANSPOSE left; a file that is not ONNX, an op onnx2tf cannot
take and a dynamic size without --image-size are refused, nothing written.

Needs onnx, onnxruntime and onnx2tf: README command 2 installs the `import` extra, and the tests install onnx2tf alone
as `pipeline import` tells a user to (tests/support/onnx2tf_alone.py). No PyTorch: the PyTorch model is a
committed file (tests/fixtures/tiny_classifier.onnx, made by tests/fixtures/make_tiny_onnx.py).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO, cli, write_class_folders

pytestmark = [pytest.mark.host, pytest.mark.slow]

IMAGENET = ["--input-mean", "123.675,116.28,103.53", "--input-std", "58.395,57.12,57.375"]

# A small CNN trained with PyTorch on write_class_folders(per_class=50) and exported by torch.onnx.export (NCHW,
# ImageNet mean/std), committed with the user's own script that made it (tests/fixtures/make_tiny_onnx.py), so the
# test needs no PyTorch; bench/importing/classifiers.py runs the script itself.
TINY_CLASSIFIER = REPO / "tests" / "fixtures" / "tiny_classifier.onnx"
TORCH_SCRIPT = (REPO / "tests" / "fixtures" / "make_tiny_onnx.py").read_text()


def _missing(*names: str) -> list:
    return [n for n in names if importlib.util.find_spec(n) is None]


@pytest.fixture(scope="module")
def converter(tmp_path_factory):
    """onnx, onnxruntime (the `import` extra, which README command 2 installs) and onnx2tf, which the extra cannot
    hold: installed as `pipeline import` says (tests/support/onnx2tf_alone.py) and put on the path of this process and of the
    commands it starts."""
    from tests.support.onnx2tf_alone import onnx2tf_folder

    missing = _missing("onnx", "onnxruntime")
    assert not missing, f"{', '.join(missing)} missing: the host suite runs with the `import` extra (pip install -e '.[host,import,test]')"
    folder = onnx2tf_folder(tmp_path_factory)
    if folder is None:
        yield
        return
    before = os.environ.get("PYTHONPATH")
    sys.path.append(str(folder))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (before, str(folder)) if p)
    yield
    sys.path.remove(str(folder))
    if before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = before


def _ok(args):
    done = cli([str(a) for a in args], timeout=900)
    assert done.returncode == 0, f"{args[:2]}: {done.stdout[-1500:]}{done.stderr[-3000:]}"
    return done


def test_pytorch_cnn_int8_within_1pp_of_onnxruntime(converter, tmp_path):
    data = write_class_folders(tmp_path / "shapes", per_class=50)  # the folders the committed model was trained on
    run = tmp_path / "run"
    _ok(["import", TINY_CLASSIFIER, "--data", data, *IMAGENET, "--out", run])
    _ok(["export", run, "--int8"])
    preflight = json.loads(_ok(["compile", run, "--check-only", "--require-full-mapping", "--json"]).stdout.strip().splitlines()[-1])
    assert preflight["ops_on_cpu"] == 0 and preflight["percent_on_edgetpu"] == 100.0
    from edge.model.tflite_file import read_model

    ops = {op.name for op in read_model(run / "model_int8.tflite").ops}
    assert "TRANSPOSE" not in ops, ops  # NHWC end to end: no per-layer transposes left
    _ok(["parity", run])
    report = json.loads((run / "parity" / "report.json").read_text())
    assert "onnxruntime" in report["reference_model"]
    reference, int8 = report["models"]["float_savedmodel"], report["models"]["int8_cpu"]
    assert reference["top1"] > 0.9 and abs(reference["top1"] - int8["top1"]) * 100 <= 1.0, (reference["top1"], int8["top1"])


def _tiny_onnx(path: Path, size=32, op: str = "Relu", opset: int = 13) -> Path:
    """A small NCHW classifier written with onnx's own helpers (random weights): Conv, OP, pooling, Gemm, Softmax, in
    ONNX opset `opset` (an op of a newer opset needs it)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("W", rng.normal(0, .3, (8, 3, 3, 3))), ("B", np.zeros(8)), ("G", rng.normal(0, .3, (8, 3))), ("C", np.zeros(3)))]
    custom = op == "Mystery"
    nodes = [helper.make_node("Conv", ["input", "W", "B"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node(op, ["c"], ["r"], name="act", **({"domain": "com.example"} if custom else {})),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "G", "C"], ["g"], name="fc"),
             helper.make_node("Softmax", ["g"], ["scores"], axis=1, name="softmax")]
    dims = [1, 3, size, size] if size else [1, 3, "height", "width"]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("input", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3])], weights)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.example", 1)] if custom else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = max(8, helper.find_min_ir_version_for(opsets[:1]))
    onnx.save(model, str(path))
    return path


def test_onnx_refusals_and_a_dynamic_size_given(converter, tmp_path):
    """In one process (click's runner), as tests/pipeline/importing/test_refusals.py runs its cases."""
    from click.testing import CliRunner

    from pipeline.cli import main
    from tests.pipeline.importing.test_refusals import _refused

    data = write_class_folders(tmp_path / "shapes", per_class=6)
    fake = tmp_path / "fake.onnx"
    fake.write_bytes(b"\x00\x01 not a protobuf of a model")
    _refused([fake, "--data", data, *IMAGENET], tmp_path / "r1", "is not a valid ONNX model")
    custom = _tiny_onnx(tmp_path / "custom.onnx", op="Mystery")
    _refused([custom, "--data", data, *IMAGENET], tmp_path / "r2",
             "ONNX op Mystery", "node 'act'", "is not one onnx2tf")
    # A standard op of ONNX opset 24 that onnx2tf has no converter for: named with its node too.
    swish = _tiny_onnx(tmp_path / "swish.onnx", op="Swish", opset=24)
    _refused([swish, "--data", data, *IMAGENET], tmp_path / "r4", "ONNX op Swish", "node 'act'", "is not one onnx2tf")
    dynamic = _tiny_onnx(tmp_path / "dynamic.onnx", size=None)
    _refused([dynamic, "--data", data, *IMAGENET], tmp_path / "r3", "dynamic height or width", "--image-size")
    given = dynamic.read_bytes()
    result = CliRunner().invoke(main, ["import", *map(str, [dynamic, "--data", data, *IMAGENET, "--image-size", "24",
                                                            "--out", tmp_path / "run"])])
    assert result.exit_code == 0, (result.output, result.exception)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["model"]["image_size"] == 24 and manifest["origin"]["input_contract"]["layout"] == "nchw"
    # A fixed size is converted at batch 1 from a copy: onnx2tf writes its shape inference back into the file it is
    # given, and the user's file must stay as it was.
    assert dynamic.read_bytes() == given
