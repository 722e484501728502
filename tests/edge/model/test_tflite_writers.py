"""The pre-flight's reader (edge.model.tflite_file) on the files each writer makes, judged by ai_edge_litert.

For every file: each op named as the interpreter names it, in the same order; each tensor that Google's own schema
module (ai_edge_litert.schema_py_generated) says holds data, inline or stored after the flatbuffer, read as a
constant, with the bytes the interpreter loads; and a copy whose weights are cut off refused naming the buffer.

- Google's models and their compiled twins (../shared/reference/coral): writers of 2019-2021.
- onnx2tf 1.29 (where installed, as `pipeline import` needs it): every file it writes for a small ONNX classifier.
- TF 2.21's converter: a full-integer int8 model, and a model with its weights stored after the flatbuffer
  (`_experimental_use_buffer_offset`, the layout LiteRT writes).
- The op-code layout ai-edge-quantizer writes (builtin_code only, deprecated_builtin_code left at 0), on every op of a
  TF int8 model, rewritten with Google's schema module.
- Ultralytics 8.4's `format=tflite int8=True` (litert-torch, then ai-edge-quantizer), made in the side venv
  .ci/ultralytics-env builds (or EDGEFLOW_ULTRALYTICS_PYTHON): `pipeline compile FILE --check-only`
  names every op as the interpreter does and blames no constant for its rank or type.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge.model.tflite_file import ModelFileError, constant_data, read_model
from tests.support.helpers import REPO, cli, int8_tflite, quiet_env

REFERENCE = REPO.parent / "shared" / "reference" / "coral"


def _schema():
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


def interpreter_ops(path: Path) -> list:
    """The op names ai_edge_litert's interpreter gives, in execution order (custom ops by their custom code)."""
    from ai_edge_litert.interpreter import Interpreter

    return [op["op_name"] for op in Interpreter(model_path=str(path))._get_ops_details()]


def schema_constants(path: Path) -> set:
    """Indices of subgraph 0's tensors whose buffer holds data, by Google's schema module: inline, or at an offset."""
    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(bytearray(path.read_bytes()), 0)
    buffers = model.buffers or []  # pycoral's model_invoking_error.tflite has none: every tensor is computed

    def has_data(index):  # buffer 0 is the schema's empty sentinel, whatever it holds
        b = buffers[index] if 0 < index < len(buffers) else None
        return b is not None and ((b.data is not None and len(b.data) > 0) or (b.offset > 1 and b.size > 0))
    return {i for i, t in enumerate(model.subgraphs[0].tensors) if has_data(t.buffer)}


def external_buffers(path: Path) -> int:
    """How many buffers keep their bytes after the flatbuffer (offset and size), by Google's schema module."""
    model = _schema().ModelT.InitFromPackedBuf(bytearray(path.read_bytes()), 0)
    return sum(1 for b in model.buffers or [] if b.offset > 1)


def assert_read_as_the_interpreter_reads(path: Path) -> None:
    info = read_model(path)
    assert [op.name for op in info.ops] == interpreter_ops(path)
    assert {t.index for t in info.tensors if t.is_constant} == schema_constants(path)
    if any(op.is_custom for op in info.ops):
        return  # a custom op (the Edge TPU's, PoseNet's decoder) is not registered here: no tensors get allocated
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    for t in info.tensors:
        if t.is_constant:
            np.testing.assert_array_equal(constant_data(path, t.index), interpreter.get_tensor(t.index),
                                          err_msg=f"tensor {t.index} {t.name!r}")


def assert_cut_weights_refused(path: Path, tmp_path: Path) -> None:
    """A copy that ends before its last buffer's bytes: refused by the reader and by the CLI, naming the buffer."""
    model = _schema().ModelT.InitFromPackedBuf(bytearray(path.read_bytes()), 0)
    last = max((b.offset + b.size, i) for i, b in enumerate(model.buffers) if b.offset > 1)
    cut = tmp_path / f"cut_{path.name}"
    cut.write_bytes(path.read_bytes()[:last[0] - 1])
    with pytest.raises(ModelFileError, match=rf"buffer {last[1]} spans bytes .* outside the file"):
        read_model(cut)
    done = cli(["compile", str(cut), "--check-only"])
    assert 0 < done.returncode < 128 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"buffer {last[1]} spans bytes" in done.stderr and "outside the file" in done.stderr, done.stderr[-2000:]


def no_constant_blamed(path: Path) -> None:
    """The pre-flight blames no constant for being a run-time tensor: no rank, type or not-constant problem names one."""
    from pipeline.edgetpu import preflight, rules

    info = read_model(path)
    constant_names = {t.name for t in info.tensors if t.index in schema_constants(path)}
    blamed = [r for r in preflight.analyze(path).rows
              if r.status in (rules.UNSUPPORTED_RANK, rules.UNSUPPORTED_DTYPE, rules.NOT_CONSTANT)
              and any(f"tensor {name!r}" in r.reason for name in constant_names)]
    assert not blamed, blamed[:3]


# --- Google's models ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in REFERENCE.glob("*.tflite")))
def test_google_models_read_as_the_interpreter_reads_them(name):
    assert_read_as_the_interpreter_reads(REFERENCE / name)


# --- TF 2.21's converter ------------------------------------------------------------------------------------------


def _tiny_keras():
    import tf_keras as keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, activation="relu")(inputs)
    x = keras.layers.DepthwiseConv2D(3)(x)
    x = keras.layers.Add()([x, keras.layers.Conv2D(8, 1)(x)])
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(4, activation="softmax")(x))


@pytest.fixture(scope="module")
def tf_int8(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tf") / "int8.tflite"
    path.write_bytes(int8_tflite(_tiny_keras(), 16))
    return path


@pytest.mark.host
def test_tf_converter_int8_reads_as_the_interpreter_reads_it(tf_int8):
    assert_read_as_the_interpreter_reads(tf_int8)
    no_constant_blamed(tf_int8)


@pytest.mark.host
def test_tf_converter_weights_after_the_flatbuffer(tmp_path):
    import tensorflow as tf

    model = _tiny_keras()
    fn = tf.function(lambda x: model(x)).get_concrete_function(tf.TensorSpec([1, 16, 16, 3], tf.float32))
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn], model)
    converter._experimental_use_buffer_offset = True  # weights after the flatbuffer, as LiteRT stores them
    path = tmp_path / "offsets.tflite"
    path.write_bytes(converter.convert())
    assert external_buffers(path) >= 4  # the layout under test: every weight and bias out of the flatbuffer
    assert_read_as_the_interpreter_reads(path)
    weights = [t for t in read_model(path).tensors if t.is_constant and len(t.shape) == 4]
    assert weights and all(t.buffer_size == 4 * int(np.prod(t.shape)) for t in weights)
    assert_cut_weights_refused(path, tmp_path)


@pytest.mark.host
def test_op_codes_written_as_ai_edge_quantizer_writes_them(tf_int8, tmp_path):
    # ai-edge-quantizer fills in builtin_code only (deprecated_builtin_code reads 0, which is ADD): seen on the QUANTIZE
    # and DEQUANTIZE of Ultralytics 8.4's int8 file. The interpreter takes the larger of the two; so must the reader.
    import flatbuffers

    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(bytearray(tf_int8.read_bytes()), 0)
    assert any(code.builtinCode for code in model.operatorCodes)  # a code 0 (ADD) alone would test nothing
    for code in model.operatorCodes:
        code.deprecatedBuiltinCode = 0
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    path = tmp_path / "quantizer_codes.tflite"
    path.write_bytes(bytes(builder.Output()))
    names = interpreter_ops(path)
    assert names == interpreter_ops(tf_int8) and "QUANTIZE" in names and "CONV_2D" in names
    assert_read_as_the_interpreter_reads(path)


# --- Ultralytics 8.4 through litert-torch -------------------------------------------------------------------------

ULTRALYTICS_INT8 = """
import sys
from pathlib import Path
import numpy as np
from PIL import Image
from ultralytics import YOLO

root, size = Path(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
for split in ("train", "val"):  # calibration images only: the export reads the val split, nothing is trained
    (root / split / "images").mkdir(parents=True)
    (root / split / "labels").mkdir()
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(root / split / "images" / f"{i}.png")
        (root / split / "labels" / f"{i}.txt").write_text("0 0.5 0.5 0.3 0.3\\n")
(root / "data.yaml").write_text(f"path: {root}\\ntrain: train/images\\nval: val/images\\nnames: [a, b]\\n")
model = YOLO("yolov8n.yaml")  # built from its yaml: no weights downloaded
print(model.export(format="tflite", int8=True, imgsz=size, data=str(root / "data.yaml"), batch=1))
"""


@pytest.fixture(scope="module")
def ultralytics_int8(tmp_path_factory) -> Path:
    from tests.support.device_env import shared_env

    python = os.environ.get("EDGEFLOW_ULTRALYTICS_PYTHON") or str(
        shared_env(tmp_path_factory, "ultralytics-env") / "bin" / "python")
    root = tmp_path_factory.mktemp("ultralytics_litert")
    env = {**quiet_env(), "YOLO_OFFLINE": "1", "YOLO_CONFIG_DIR": str(root / "settings")}
    done = subprocess.run([python, "-c", ULTRALYTICS_INT8, str(root), "64"], capture_output=True, text=True, env=env,
                          cwd=root, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.host
def test_ultralytics_litert_int8_file_read_as_the_interpreter_reads_it(ultralytics_int8, tmp_path):
    # The layout under test: weights after the flatbuffer, and op codes (QUANTIZE, DEQUANTIZE) in builtin_code alone.
    assert external_buffers(ultralytics_int8) > 0
    codes = _schema().ModelT.InitFromPackedBuf(bytearray(ultralytics_int8.read_bytes()), 0).operatorCodes
    assert any(c.builtinCode and not c.deprecatedBuiltinCode for c in codes)
    assert_read_as_the_interpreter_reads(ultralytics_int8)
    no_constant_blamed(ultralytics_int8)
    done = cli(["compile", str(ultralytics_int8), "--check-only", "--json"])
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])["ops"]
    assert [r["op"] for r in rows] == interpreter_ops(ultralytics_int8)
    info = read_model(ultralytics_int8)
    filters = [info.tensor(op.inputs[1]) for op in info.ops if op.name == "CONV_2D"]
    assert filters and all(t.is_constant and t.dtype == "int8" and len(t.shape) == 4 for t in filters)
    assert_cut_weights_refused(ultralytics_int8, tmp_path)


@pytest.mark.host
def test_sparse_weights_refused_naming_the_tensor(tmp_path):
    # TF's converter with EXPERIMENTAL_SPARSITY keeps only the nonzero weights (and a DENSIFY op): read as dense, the
    # sizes and values would be wrong, so the reader refuses the file and says how to convert it.
    import tensorflow as tf
    import tf_keras as keras

    inputs = keras.Input((64,))
    dense = keras.layers.Dense(64)
    model = keras.Model(inputs, dense(inputs))
    w, b = dense.get_weights()
    w[np.abs(w) < np.quantile(np.abs(w), 0.9)] = 0
    dense.set_weights([w, b])
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    path = tmp_path / "sparse.tflite"
    path.write_bytes(converter.convert())
    assert interpreter_ops(path) == ["DENSIFY", "FULLY_CONNECTED"]  # the layout under test
    with pytest.raises(ModelFileError, match=r"tensor \d+ is stored sparse"):
        read_model(path)
    done = cli(["compile", str(path), "--check-only"])
    assert 0 < done.returncode < 128 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "is stored sparse" in done.stderr and "EXPERIMENTAL_SPARSITY" in done.stderr, done.stderr[-2000:]


def test_op_codes_newer_than_the_tflite_package_named_as_the_interpreter_names_them(tmp_path):
    # STABLEHLO_CASE (209) is in ai_edge_litert's schema and not in the `tflite` package's: named from the former.
    import flatbuffers

    schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(bytearray((REFERENCE / "mobilenet_v1_0.25_128_quant.tflite").read_bytes()), 0)
    model.operatorCodes[0].builtinCode = schema.BuiltinOperator.STABLEHLO_CASE
    model.operatorCodes[0].deprecatedBuiltinCode = schema.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    info = read_model(bytes(builder.Output()))
    assert "STABLEHLO_CASE" in [op.name for op in info.ops]


# --- onnx2tf ------------------------------------------------------------------------------------------------------

ONNX2TF_WRITE = """
import sys
import numpy as np
import onnx2tf

onnx_path, out, calibration = sys.argv[1], sys.argv[2], sys.argv[3]
# Calibration images of the model's own input (NHWC, 0..1) and the sample file onnx2tf checks its transposes with,
# both from here: onnx2tf would download its sample file otherwise.
rng = np.random.default_rng(0)
np.save(calibration, rng.uniform(0, 1, (8, 32, 32, 3)).astype(np.float32))
np.save("calibration_image_sample_data_20x128x128x3_float32.npy", rng.uniform(0, 1, (20, 128, 128, 3)).astype(np.float32))
onnx2tf.convert(input_onnx_file_path=onnx_path, output_folder_path=out, output_integer_quantized_tflite=True,
                custom_input_op_name_np_data_path=[["input", calibration, [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]]],
                not_use_onnxsim=True, non_verbose=True)
"""


@pytest.fixture(scope="module")
def onnx2tf_files(tmp_path_factory) -> list:
    import importlib.util

    from tests.support.onnx2tf_alone import onnx2tf_folder

    missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    assert not missing, f"{', '.join(missing)} missing: the host suite runs with the `import` extra (pip install -e '.[host,import,test]')"
    folder = onnx2tf_folder(tmp_path_factory)  # onnx2tf installed as `pipeline import` says, where the venv lacks it
    env = quiet_env()
    if folder is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(folder)) if p)
    root = tmp_path_factory.mktemp("onnx2tf")
    onnx = root / "tiny_classifier.onnx"  # a copy: onnx2tf writes its shape inference back into the file it is given
    onnx.write_bytes((REPO / "tests" / "fixtures" / "tiny_classifier.onnx").read_bytes())
    done = subprocess.run([sys.executable, "-c", ONNX2TF_WRITE, str(onnx), str(root / "out"), str(root / "calibration.npy")],
                          capture_output=True, text=True, env=env, cwd=root, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return sorted((root / "out").glob("*.tflite"))


@pytest.mark.host
def test_onnx2tf_files_read_as_the_interpreter_reads_them(onnx2tf_files):
    names = [p.name for p in onnx2tf_files]
    for kind in ("_float32.tflite", "_full_integer_quant.tflite"):  # the float file, and the one for the compiler
        assert any(name.endswith(kind) for name in names), names
    for path in onnx2tf_files:
        assert_read_as_the_interpreter_reads(path)
    full_integer = next(p for p in onnx2tf_files if p.name.endswith("_full_integer_quant.tflite"))
    no_constant_blamed(full_integer)


def test_a_tensor_naming_a_missing_buffer_is_refused_as_the_interpreter_refuses_it(tmp_path):
    import flatbuffers
    from ai_edge_litert.interpreter import Interpreter

    model = _schema().ModelT.InitFromPackedBuf(bytearray((REFERENCE / "mobilenet_v1_0.25_128_quant.tflite").read_bytes()), 0)
    weights = next(i for i, t in enumerate(model.subgraphs[0].tensors) if len(t.shape) == 4 and t.buffer)
    model.subgraphs[0].tensors[weights].buffer = len(model.buffers) + 3
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    path = tmp_path / "missing_buffer.tflite"
    path.write_bytes(bytes(builder.Output()))
    with pytest.raises(ValueError, match="out of range buffer"):
        Interpreter(model_path=str(path))
    with pytest.raises(ModelFileError, match=rf"tensor {weights} names buffer {len(model.buffers) + 3}, the model has"):
        read_model(path)
