"""edge.model.tflite_file: tensors, ops, versions and options read without TensorFlow, and damaged files refused.

The TensorFlow-free tests read the committed fixtures (tests/fixtures/make_fixtures.py builds them);
the `host` tests convert a tiny tf_keras model once per module and check what the reader reports
against what the converter was asked for.
"""
from __future__ import annotations

import numpy as np
import pytest

from edge.model.tflite_file import (
    EDGETPU_CUSTOM_OP,
    ModelFileError,
    ModelInfo,
    OpInfo,
    TensorInfo,
    cpu_ops,
    edgetpu_min_runtime_versions,
    io_signatures,
    is_edgetpu_compiled,
    op_counts,
    read_model,
)
from tests.support.helpers import REPO, int8_tflite

FIXTURES = REPO / "tests" / "fixtures"


def test_path_and_bytes_read_the_same():
    path = FIXTURES / "tiny_int8.tflite"
    from_path, from_bytes = read_model(path), read_model(path.read_bytes())
    assert from_path == from_bytes and str(path) != ""
    assert isinstance(from_path, ModelInfo) and from_path.file_size == path.stat().st_size
    assert all(isinstance(t, TensorInfo) for t in from_path.tensors)
    assert all(isinstance(op, OpInfo) for op in from_path.ops)


def test_fixture_ops_in_execution_order():
    info = read_model(FIXTURES / "tiny_int8.tflite")
    assert [op.index for op in info.ops] == list(range(len(info.ops)))
    assert info.ops[0].name == "QUANTIZE" and info.ops[-1].name == "QUANTIZE"  # uint8 I/O wrappers
    assert info.num_subgraphs == 1
    first_in = info.tensor(info.inputs[0])
    assert first_in.dtype == "uint8" and first_in.shape == first_in.shape_signature == (1, 16, 16, 3)
    assert info.ops[0].inputs == info.inputs and info.ops[-1].outputs == info.outputs


def test_op_counts_by_name_and_version():
    info = read_model(FIXTURES / "tiny_int8.tflite")
    counts = op_counts(info)
    assert counts[("QUANTIZE", 1)] == 2
    assert sum(counts.values()) == len(info.ops)


def test_edgetpu_custom_op_is_recognised():
    compiled = read_model(FIXTURES / "tiny_edgetpu.tflite")
    assert is_edgetpu_compiled(compiled)
    assert any(op.name == EDGETPU_CUSTOM_OP for op in compiled.ops)
    assert not is_edgetpu_compiled(read_model(FIXTURES / "tiny_int8.tflite"))


REFERENCE = REPO.parent / "shared" / "reference" / "coral"


def test_compiled_model_cpu_ops_and_custom_codes_from_a_real_compiled_file():
    # Google's compiled PoseNet: the Edge TPU op, then the decoder custom op it left on the CPU.
    info = read_model(REFERENCE / "posenet_mobilenet_v1_075_353_481_quant_decoder_edgetpu.tflite")
    assert [op.name for op in info.ops] == [EDGETPU_CUSTOM_OP, "PosenetDecoderOp"]
    assert all(op.is_custom for op in info.ops)
    assert [op.name for op in cpu_ops(info)] == ["PosenetDecoderOp"]
    assert not any(op.is_custom for op in read_model(FIXTURES / "tiny_int8.tflite").ops)


def test_edgetpu_package_min_runtime_version():
    # Every compiled twin Google made carries a DWN1 package; libedgetpu's oldest valid runtime is 10.
    twins = sorted(REFERENCE.glob("*_edgetpu.tflite"))
    assert len(twins) >= 5
    for twin in twins:
        versions = edgetpu_min_runtime_versions(twin)
        assert len(versions) == sum(op.name == EDGETPU_CUSTOM_OP for op in read_model(twin).ops) == 1
        assert 10 <= versions[0] <= 16
    # The project's own fixture names its op edgetpu-custom-op but holds no package: not a compiled model.
    with pytest.raises(ModelFileError, match="no readable Edge TPU package"):
        edgetpu_min_runtime_versions(FIXTURES / "tiny_edgetpu.tflite")
    assert edgetpu_min_runtime_versions(FIXTURES / "tiny_int8.tflite") == []


def test_variable_tensors_are_read():
    # TFLite's int8 LSTM keeps its state in two variable tensors: int8 output state, int16 cell state.
    info = read_model(REFERENCE / "keras_lstm_mnist_ptq.tflite")
    assert sorted(t.dtype for t in info.tensors if t.is_variable) == ["int16", "int8"]
    assert not any(t.is_variable for t in read_model(FIXTURES / "tiny_int8.tflite").tensors)


def test_io_signatures_carry_dtype_shape_and_quantization():
    inputs, outputs = io_signatures(read_model(REFERENCE / "mobilenet_v1_0.25_128_quant.tflite"))
    # The reference README: uint8 input, scale 0.0078125 and zero point 128; 1001 classes.
    assert [(s.dtype, s.shape, s.scales, s.zero_points) for s in inputs] == [("uint8", (1, 128, 128, 3), (0.0078125,), (128,))]
    assert outputs[0].shape == (1, 1001) and "uint8 [1, 1001]" in outputs[0].describe()


@pytest.mark.parametrize("damage, expected", [
    (lambda data: b"", "expected the 'TFL3' identifier"),
    (lambda data: data[:4] + b"XXXX" + data[8:], "expected the 'TFL3' identifier"),
    (lambda data: data[:200], "damaged"),
    (lambda data: data[:8] + b"\xff" * (len(data) - 8), "damaged"),
])
def test_damaged_files_raise_model_file_error_naming_the_file(tmp_path, damage, expected):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(damage((FIXTURES / "tiny_int8.tflite").read_bytes()))
    with pytest.raises(ModelFileError, match=expected) as err:
        read_model(bad)
    assert str(bad) in str(err.value)
    assert isinstance(err.value, ValueError)


def test_missing_file_is_a_model_file_error(tmp_path):
    with pytest.raises(ModelFileError, match="cannot read .*nothing.tflite"):
        read_model(tmp_path / "nothing.tflite")


# --- on a model converted here: the reader reports what the converter was asked for ---------------

@pytest.fixture(scope="module")
def converted():
    """(bytes, dynamic-batch bytes) of a tiny CNN with a dilated conv, a strided conv and a dense layer."""
    keras = pytest.importorskip("tf_keras")
    inputs = keras.Input((12, 12, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)
    x = keras.layers.Conv2D(4, 3, strides=2, padding="same", activation="relu")(x)
    x = keras.layers.Conv2D(6, 3, dilation_rate=2, padding="same", activation="relu6")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(5, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    return int8_tflite(model, 12), int8_tflite(model, 12, batch=None)


@pytest.mark.host
def test_options_are_plain_values_with_enum_names(converted):
    info = read_model(converted[0])
    convs = [op for op in info.ops if op.name == "CONV_2D"]
    assert len(convs) == 2 and all(op.version >= 1 for op in convs)
    strided, dilated = convs
    assert strided.options["stride_w"] == strided.options["stride_h"] == 2
    assert strided.options["fused_activation_function"] == "RELU" and strided.options["padding"] == "SAME"
    assert dilated.options["dilation_h_factor"] == dilated.options["dilation_w_factor"] == 2
    assert dilated.options["fused_activation_function"] == "RELU6"
    dense = next(op for op in info.ops if op.name == "FULLY_CONNECTED")
    assert dense.options["weights_format"] == "DEFAULT" and dense.options["keep_num_dims"] is False


@pytest.mark.host
def test_tensor_types_quantization_and_constants(converted):
    info = read_model(converted[0])
    conv = next(op for op in info.ops if op.name == "CONV_2D")
    data, weights, bias = (info.tensor(i) for i in conv.inputs)
    assert data.dtype == "int8" and not data.is_constant and data.buffer_size == 0
    assert weights.dtype == "int8" and weights.is_constant
    assert weights.buffer_size == int(np.prod(weights.shape))  # one byte per int8 weight
    assert len(weights.scales) == weights.shape[0] == len(weights.zero_points)  # per-channel
    assert bias.dtype == "int32" and bias.buffer_size == 4 * bias.shape[0] and set(bias.zero_points) == {0}
    image = info.tensor(info.inputs[0])
    assert image.dtype == "uint8" and image.zero_points == (0,) and image.scales[0] == pytest.approx(1.0, abs=0.01)
    assert info.tensor(info.outputs[0]).dtype == "uint8"


@pytest.mark.host
def test_dynamic_batch_shows_in_the_shape_signature(converted):
    static, dynamic = (read_model(m) for m in converted)
    assert static.tensor(static.inputs[0]).shape_signature == (1, 12, 12, 3)
    image = dynamic.tensor(dynamic.inputs[0])
    assert image.shape_signature[0] == -1 and image.shape == (1, 12, 12, 3)


@pytest.mark.host
def test_agrees_with_the_tensorflow_interpreter(converted):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=converted[0])
    info = read_model(converted[0])
    details = {d["index"]: d for d in interpreter.get_tensor_details()}
    for t in info.tensors:
        if t.index in details:
            assert details[t.index]["name"] == t.name
            assert tuple(details[t.index]["shape"]) == t.shape
            assert np.dtype(details[t.index]["dtype"]).name == t.dtype


# --- options that cannot be read are an error naming the op, never {} (which reads as "defaults") --

def _conv_options_type_at(data: bytes) -> int:
    """Byte position of op 1's (CONV_2D) builtin_options_type in the fixture."""
    import tflite

    op = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0).Operators(1)
    return op._tab.Pos + op._tab.Offset(10)  # vtable slot of field 3, builtin_options_type


def test_options_of_an_unknown_type_are_an_error_naming_the_op():
    data = bytearray((FIXTURES / "tiny_int8.tflite").read_bytes())
    at = _conv_options_type_at(bytes(data))
    assert data[at] == 1  # Conv2DOptions
    data[at] = 250  # a type code this schema does not know
    with pytest.raises(ModelFileError, match="op 1 CONV_2D: its options are of type 250") as err:
        read_model(bytes(data))
    from edge.errors import EdgeError, ModelCheckError

    assert isinstance(err.value, ModelCheckError) and isinstance(err.value, EdgeError)  # the CLIs print it cleanly


def test_an_option_field_that_cannot_be_read_is_an_error_not_a_default(monkeypatch):
    import tflite

    def unreadable(self):
        raise TypeError("unpack_from requires a buffer of at least 4 bytes")

    monkeypatch.setattr(tflite.Conv2DOptions, "StrideW", unreadable)
    with pytest.raises(ModelFileError, match=r"op 1 CONV_2D: option 'stride_w' of its Conv2DOptions cannot be read \(TypeError"):
        read_model(FIXTURES / "tiny_int8.tflite")


def test_a_missing_tflite_package_is_not_called_damage(monkeypatch):
    import sys

    from edge.errors import BackendUnavailable
    from edge.model.check import check_model
    from edge.model.tflite_file import ReaderUnavailable

    monkeypatch.setitem(sys.modules, "tflite", None)  # `import tflite` now raises ImportError
    with pytest.raises(ReaderUnavailable, match="needs the `tflite` package.*pip install tflite==2.18.0"):
        read_model(FIXTURES / "tiny_int8.tflite")
    with pytest.raises(BackendUnavailable, match="cannot check m.tflite: .*`tflite` package.*pip install") as err:
        check_model((FIXTURES / "tiny_int8.tflite").read_bytes(), name="m.tflite")
    assert "damaged" not in str(err.value)


@pytest.mark.host
def test_dynamic_tensors_and_ops_over_a_version_limit(converted):
    from edge.model.tflite_file import dynamic_tensors, ops_over_version

    static, dynamic = (read_model(m) for m in converted)
    assert dynamic_tensors(static) == []
    assert dynamic.inputs[0] in [t.index for t in dynamic_tensors(dynamic)]
    conv_version = next(op.version for op in static.ops if op.name == "CONV_2D")
    over = ops_over_version(static, {"CONV_2D": conv_version - 1, "FULLY_CONNECTED": 99})
    assert [(op.name, limit) for op, limit in over] == [("CONV_2D", conv_version - 1)] * 2
