"""Edge TPU pre-flight: each rule flags what it should, with the compiler's status and a reason."""
from __future__ import annotations

import pytest

from pipeline import edgetpu_rules as rules
from pipeline.preflight import analyze, check_op, model_fatal, table
from tests.helpers import REPO, int8_tflite

FIXTURES = REPO / "tests" / "fixtures"


def test_float_model_is_flagged_as_unsupported_data_type():
    # The fixture is a float32 TFLite model: its first op already works on float tensors.
    result = analyze(FIXTURES / "tiny_float.tflite")
    first = result.rows[0]
    assert first.status == rules.UNSUPPORTED_DTYPE and "float32" in first.reason
    assert result.first_fallback == first and result.ops_on_edgetpu == 0


def test_int8_fixture_maps_fully():
    result = analyze(FIXTURES / "tiny_int8.tflite")
    assert result.fully_mapped and result.percent_on_edgetpu == 100.0
    assert "6/6 ops predicted on the Edge TPU" in result.headline()


def test_op_version_above_compiler_16_is_flagged():
    from edge.tflite_file import read_model

    data = (FIXTURES / "tiny_int8.tflite").read_bytes()
    info = read_model(data)
    conv = next(op for op in info.ops if op.name == "CONV_2D")
    status, reason = check_op(conv._replace(version=6), info, data)
    assert status == rules.VERSION_NOT_SUPPORTED and "CONV_2D v6" in reason and "up to v5" in reason
    assert check_op(conv, info, data) is None  # v3, as TF 2.21 writes it, is fine


def test_version_beyond_the_parser_is_fatal_for_the_whole_model(monkeypatch):
    # Lower the limit so the fixture's real CONV_2D v3 exceeds it: the same path a v6 would take.
    monkeypatch.setitem(rules.MAX_PARSED_VERSION, "CONV_2D", 2)
    result = analyze(FIXTURES / "tiny_int8.tflite")
    assert result.fatal and "CONV_2D v3" in result.fatal
    assert not result.fully_mapped and "refuse the model" in result.headline()


def _with_op_version(data: bytes, name: str, version: int) -> bytes:
    """The model with opcode `name` set to `version`, written in place where the file stores it.

    Only an opcode whose version is stored (not the default 1) can be changed this way; the
    offsets come from the tflite package's own accessors, nothing is decoded by hand.
    """
    import struct

    import tflite

    out = bytearray(data)
    model = tflite.Model.GetRootAsModel(out, 0)
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        if tflite.opcode2name(max(code.BuiltinCode(), code.DeprecatedBuiltinCode())) == name:
            field = code._tab.Offset(8)  # OperatorCode.version, as OperatorCode.Version() reads it
            assert field, f"{name} keeps the default version: not stored, cannot be edited in place"
            struct.pack_into("<i", out, code._tab.Pos + field, version)
            return bytes(out)
    raise AssertionError(f"no {name} opcode in the model")


def test_conv_v6_in_a_real_file_fails_the_whole_compile():
    # The fixture's CONV_2D v3 rewritten to v6 (google-coral/edgetpu #631: compiler 16 cannot parse it).
    data = _with_op_version((FIXTURES / "tiny_int8.tflite").read_bytes(), "CONV_2D", 6)
    result = analyze(data)
    conv = next(r for r in result.rows if r.op == "CONV_2D")
    assert conv.version == 6 and conv.status == rules.VERSION_NOT_SUPPORTED and "up to v5" in conv.reason
    assert result.first_fallback == conv
    assert result.fatal.startswith("Model could not be parsed") and "CONV_2D v6" in result.fatal
    assert "refuse the model" in result.headline()


@pytest.mark.parametrize("name, version, limit", [("EXP", 2, 1), ("QUANTIZE", 3, 2), ("TRANSPOSE_CONV", 4, 3),
                                                  ("FULLY_CONNECTED", 10, 9), ("CONV_2D", 6, 5)])
def test_each_version_limit_is_fatal_even_for_ops_outside_the_table(name, version, limit):
    # OpInfo lists built here: EXP is not in the supported table, yet v2 fails parsing, not mapping.
    from edge.tflite_file import read_model

    data = (FIXTURES / "tiny_int8.tflite").read_bytes()
    info = read_model(data)
    op = info.ops[1]._replace(name=name, version=version)
    assert check_op(op, info, data)[0] == rules.VERSION_NOT_SUPPORTED
    assert check_op(op._replace(version=limit), info, data) != (rules.VERSION_NOT_SUPPORTED,)
    fatal = model_fatal(info._replace(ops=[info.ops[0], op] + info.ops[2:]))
    assert f"{name} v{version}" in fatal and f"up to v{limit}" in fatal


def test_dequantize_in_the_middle_ends_the_edgetpu_segment():
    from edge.tflite_file import read_model

    data = (FIXTURES / "tiny_int8.tflite").read_bytes()
    info = read_model(data)
    ops = list(info.ops)
    ops[2] = ops[2]._replace(name="DEQUANTIZE", version=2)  # where MEAN was
    status, reason = check_op(ops[2], info, data)
    assert status == rules.UNSUPPORTED_DTYPE and "float" in reason


def test_older_runtime_leaves_quantize_on_the_cpu():
    # QUANTIZE is in the table from runtime 13 (EDGETPU.md 2d): with -m 12 neither wrapper maps. The
    # input's QUANTIZE stays on the CPU in front of the Edge TPU segment; the output's ends the segment.
    result = analyze(FIXTURES / "tiny_int8.tflite", runtime=12)
    first, last = result.rows[0], result.rows[-1]
    assert first.status == last.status == rules.NOT_SUPPORTED and "runtime 13+" in first.reason
    assert result.first_fallback == last and result.ops_on_edgetpu == len(result.rows) - 2


keras = pytest.importorskip("tf_keras", reason="building test models needs tf-keras (host side)")


def _cnn(middle=None, size=16):
    inputs = keras.Input((size, size, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    if middle is not None:
        x = middle(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(4, activation="softmax")(x)
    return keras.Model(inputs, outputs)


@pytest.mark.host
def test_unsupported_op_in_the_middle_falls_back_from_there():
    result = analyze(int8_tflite(_cnn(keras.layers.LeakyReLU(0.1)), 16))
    fallback = result.first_fallback
    assert fallback.op == "LEAKY_RELU" and fallback.status == rules.NOT_SUPPORTED
    assert "not in the Edge TPU's supported operations" in fallback.reason
    before = [r for r in result.rows if r.index < fallback.index]
    after = [r for r in result.rows if r.index > fallback.index]
    assert before and all(r.on_edgetpu for r in before)
    assert after and not any(r.on_edgetpu for r in after)
    assert {r.status for r in after} == {rules.MORE_THAN_ONE_SUBGRAPH}
    assert "falls back to the CPU from op" in result.headline() and "LEAKY_RELU" in table(result)


@pytest.mark.host
def test_plain_small_cnn_with_uint8_io_maps_fully():
    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(4, activation="softmax")(x)
    result = analyze(int8_tflite(keras.Model(inputs, outputs), 16))
    assert result.fully_mapped and result.fatal is None and result.first_fallback is None
    assert result.percent_on_edgetpu == 100.0 and result.ops_on_cpu == 0
    ops = [r.op for r in result.rows]
    assert ops[0] == ops[-1] == "QUANTIZE"  # the uint8<->int8 wrappers, predicted mapped (Example A)
    assert {"CONV_2D", "MAX_POOL_2D", "MEAN", "FULLY_CONNECTED", "SOFTMAX"} <= set(ops)
    assert f"{len(ops)}/{len(ops)} ops predicted on the Edge TPU (100%)" in result.headline()


@pytest.mark.host
def test_float_io_quantize_stays_on_the_cpu_without_splitting():
    import tensorflow as tf

    result = analyze(int8_tflite(_cnn(), 16, io_type=tf.float32))
    first, last = result.rows[0], result.rows[-1]
    assert first.op == "QUANTIZE" and first.status == rules.OTHER_LIMITATION and "float32" in first.reason
    assert last.op == "DEQUANTIZE" and last.status == rules.UNSUPPORTED_DTYPE
    assert result.first_fallback is None and all(r.on_edgetpu for r in result.rows[1:-1])


@pytest.mark.host
def test_dynamic_batch_is_flagged():
    result = analyze(int8_tflite(_cnn(), 16, batch=None))
    flagged = [r for r in result.rows if "dynamic size" in r.reason]
    assert flagged and flagged[0].status == rules.OTHER_LIMITATION
    assert "-1" in flagged[0].reason and not result.fully_mapped
    assert "dynamic-sized tensor" in result.fatal and "batch of 1" in result.fatal


@pytest.mark.host
def test_five_dimensional_tensor_is_flagged():
    import tensorflow as tf

    # A max over a group axis in 5-D: the converter cannot fold this reshape away.
    five_d = keras.layers.Lambda(lambda t: tf.reduce_max(tf.reshape(t, [1, 2, 8, 16, 8]), axis=1))
    result = analyze(int8_tflite(_cnn(five_d), 16))
    rank = [r for r in result.rows if r.status == rules.UNSUPPORTED_RANK]
    assert rank and "[1, 2, 8, 16, 8]" in rank[0].reason
    assert result.first_fallback == rank[0]


@pytest.mark.host
def test_batch_8_is_flagged_by_the_rank_rule():
    result = analyze(int8_tflite(_cnn(), 16, batch=8))
    assert result.first_fallback.status == rules.UNSUPPORTED_RANK and "[8, 16, 16" in result.first_fallback.reason


@pytest.mark.host
def test_pooling_with_fused_activation_is_flagged():
    # A ReLU right after pooling is fused into the pool op by the converter.
    pool_relu = keras.Sequential([keras.layers.AveragePooling2D(2), keras.layers.ReLU()])
    result = analyze(int8_tflite(_cnn(pool_relu), 16))
    pool = [r for r in result.rows if r.op == "AVERAGE_POOL_2D"]
    if "fused" in pool[0].reason:
        assert pool[0].status == rules.OTHER_LIMITATION
    else:  # the converter kept the ReLU separate: then both map
        assert pool[0].on_edgetpu
