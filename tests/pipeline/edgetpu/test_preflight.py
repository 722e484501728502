"""Edge TPU pre-flight: each rule flags what it should, with the compiler's status and a reason."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from edge.model.tflite_file import cpu_ops, edgetpu_min_runtime_versions, read_model
from pipeline.edgetpu import rules
from pipeline.edgetpu.preflight import analyze, check_op, model_fatal, table
from tests.support.helpers import REPO, int8_tflite

FIXTURES = REPO / "tests" / "fixtures"
REFERENCE = REPO.parent / "shared" / "reference" / "coral"
# Every CPU model in the reference folder that has a compiled twin beside it (found, not listed here).
PAIRS = sorted(t.name[:-len("_edgetpu.tflite")] for t in REFERENCE.glob("*_edgetpu.tflite")
               if (REFERENCE / t.name.replace("_edgetpu.tflite", ".tflite")).is_file())
STATUSES = {rules.MAPPED, rules.MORE_THAN_ONE_SUBGRAPH, rules.NOT_SUPPORTED, rules.VERSION_NOT_SUPPORTED,
            rules.UNSUPPORTED_DTYPE, rules.OTHER_LIMITATION, rules.UNSUPPORTED_RANK, rules.STRIDED_SLICE_STRIDES,
            rules.NOT_CONSTANT}


def _check_only_json(model, *options):
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["compile", str(model), "--check-only", "--json", *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_reference_pairs_are_there():
    # The README of the reference folder lists five pairs; fewer found means the tests below check less.
    assert len(PAIRS) >= 5, PAIRS


@pytest.mark.parametrize("name", PAIRS)
def test_prediction_lists_exactly_what_the_real_compiler_left_on_the_cpu(name):
    """Ground truth: the ops Google's compiler left outside edgetpu-custom-op in the compiled twin."""
    expected = Counter(op.name for op in cpu_ops(read_model(REFERENCE / f"{name}_edgetpu.tflite")))
    report = _check_only_json(REFERENCE / f"{name}.tflite")
    assert len(report["ops"]) == len(read_model(REFERENCE / f"{name}.tflite").ops)
    assert Counter(o["op"] for o in report["ops"] if not o["on_edgetpu"]) == expected
    for o in report["ops"]:  # each op says why, in the compiler's own status words
        assert o["status"] in STATUSES and (o["on_edgetpu"] == (o["status"] == rules.MAPPED))
        assert o["on_edgetpu"] or o["reason"]
    fallback = report["first_fallback"]
    assert (fallback is None) == (not expected)
    if fallback:
        assert fallback["op"] in expected and fallback["status"] != rules.MORE_THAN_ONE_SUBGRAPH and fallback["reason"]


@pytest.mark.parametrize("name", PAIRS)
def test_prediction_at_the_runtime_the_twin_declares_lists_what_the_compiler_left_on_the_cpu(name):
    """The twin's Edge TPU package says the oldest runtime that runs it (12 for every pair here): asked
    for that runtime, the prediction keeps on the CPU exactly the ops the twin keeps outside edgetpu-custom-op."""
    twin = REFERENCE / f"{name}_edgetpu.tflite"
    runtime = max(edgetpu_min_runtime_versions(twin))
    expected = Counter(op.name for op in cpu_ops(read_model(twin)))
    report = _check_only_json(REFERENCE / f"{name}.tflite", "--min-runtime-version", str(runtime))
    assert report["assumed_runtime"] == runtime
    assert Counter(o["op"] for o in report["ops"] if not o["on_edgetpu"]) == expected


def test_every_runtime_rule_has_its_check():
    from pipeline.edgetpu import checks

    assert set(checks._OLD_RUNTIME_CHECKS) == set(rules.LOOSENED_AT_RUNTIME)


def test_dilated_depthwise_maps_from_runtime_12():
    # deeplab's twin (a runtime-12 package) maps its 2x2-dilated depthwise convolutions; Coral's
    # table's "<=12: not supported" is kept below 12, where no twin says otherwise.
    model = REFERENCE / "deeplabv3_mnv2_dm05_pascal_quant.tflite"
    dilated = [op.index for op in read_model(model).ops if op.name == "DEPTHWISE_CONV_2D"
               and (op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1)) != (1, 1)]
    assert dilated
    at_12, at_11 = analyze(model, runtime=12).rows, analyze(model, runtime=11).rows
    assert all(at_12[i].on_edgetpu for i in dilated)
    first = at_11[dilated[0]]
    assert first.status == rules.OTHER_LIMITATION and "dilated" in first.reason and "below 12" in first.reason


def test_ops_downstream_of_a_cpu_op_stay_on_the_cpu_and_say_so():
    # deeplab's compiled twin: what reads the CPU resize's output is on the CPU too, ARG_MAX for its own reason.
    twin = read_model(REFERENCE / "deeplabv3_mnv2_dm05_pascal_quant_edgetpu.tflite")
    result = analyze(REFERENCE / "deeplabv3_mnv2_dm05_pascal_quant.tflite")
    off = [r for r in result.rows if not r.on_edgetpu]
    assert [r.op for r in off] == [op.name for op in cpu_ops(twin)]  # same ops, same order
    assert result.first_fallback == off[0] and "1x1" in off[0].reason
    assert {r.status for r in off[1:-1]} == {rules.MORE_THAN_ONE_SUBGRAPH}
    assert off[-1].op == "ARG_MAX" and off[-1].status == rules.NOT_SUPPORTED
    assert "reads the output of op" in off[1].reason


def test_lstm_maps_with_its_int16_state_from_runtime_12():
    model = REFERENCE / "keras_lstm_mnist_ptq.tflite"
    # What the compiled twin shows: edgetpu-custom-op only, in a runtime-12 package.
    assert max(edgetpu_min_runtime_versions(REFERENCE / "keras_lstm_mnist_ptq_edgetpu.tflite")) == 12
    assert analyze(model).fully_mapped and analyze(model, runtime=12).fully_mapped
    lstm = next(r for r in analyze(model, runtime=11).rows if r.op == "UNIDIRECTIONAL_SEQUENCE_LSTM")
    assert lstm.status == rules.NOT_SUPPORTED and "runtime 12+" in lstm.reason  # below what any twin shows
    info = read_model(model)
    state = [info.tensor(i) for op in info.ops for i in op.inputs if i >= 0 and info.tensor(i).is_variable]
    assert {t.dtype for t in state} == {"int8", "int16"}  # the int16 cell state is what the old rule refused


def test_custom_op_is_logged_as_custom_and_left_on_the_cpu():
    result = analyze(REFERENCE / "posenet_mobilenet_v1_075_353_481_quant_decoder.tflite")
    decoder = [r for r in result.rows if not r.on_edgetpu]
    assert len(decoder) == 1 and decoder[0].custom and decoder[0].log_op == "CUSTOM"
    assert decoder[0].status == rules.UNSUPPORTED_DTYPE and "float32" in decoder[0].reason
    assert "CUSTOM" in table(result)


def test_json_goes_to_stdout_and_messages_to_stderr():
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["compile", str(FIXTURES / "tiny_int8.tflite"), "--check-only", "--json"])
    assert result.exit_code == 0
    report = json.loads(result.stdout)  # one JSON object and nothing else
    assert report["ops_on_cpu"] == 0 and "pre-flight:" in result.stderr and "pre-flight:" not in result.stdout


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
    from edge.model.tflite_file import read_model

    data = (FIXTURES / "tiny_int8.tflite").read_bytes()
    info = read_model(data)
    conv = next(op for op in info.ops if op.name == "CONV_2D")
    status, reason, _ = check_op(conv._replace(version=6), info, data)
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
    from edge.model.tflite_file import read_model

    data = (FIXTURES / "tiny_int8.tflite").read_bytes()
    info = read_model(data)
    op = info.ops[1]._replace(name=name, version=version)
    assert check_op(op, info, data)[0] == rules.VERSION_NOT_SUPPORTED
    at_limit = check_op(op._replace(version=limit), info, data)
    assert at_limit is None or at_limit[0] != rules.VERSION_NOT_SUPPORTED  # the limit itself still parses
    fatal = model_fatal(info._replace(ops=[info.ops[0], op] + info.ops[2:]))
    assert f"{name} v{version}" in fatal and f"up to v{limit}" in fatal


def test_dequantize_in_the_middle_ends_the_edgetpu_segment():
    from edge.model.tflite_file import read_model

    data = (FIXTURES / "tiny_int8.tflite").read_bytes()
    info = read_model(data)
    ops = list(info.ops)
    ops[2] = ops[2]._replace(name="DEQUANTIZE", version=2)  # where MEAN was
    status, reason, _ = check_op(ops[2], info, data)
    assert status == rules.UNSUPPORTED_DTYPE and "float" in reason


def test_older_runtime_leaves_quantize_on_the_cpu():
    # The 8-bit QUANTIZE maps from runtime 12 (the reference twins, runtime-12 packages, map it; Coral's
    # table says 13): at runtime 12 both wrappers map, with -m 11 neither does. The input's QUANTIZE
    # stays on the CPU in front of the Edge TPU segment; the output's ends the segment.
    assert analyze(FIXTURES / "tiny_int8.tflite", runtime=12).fully_mapped
    result = analyze(FIXTURES / "tiny_int8.tflite", runtime=11)
    first, last = result.rows[0], result.rows[-1]
    assert first.op == last.op == "QUANTIZE"
    assert first.status == last.status == rules.NOT_SUPPORTED and "runtime 12+" in first.reason
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
    # What to change names the activation the Edge TPU has (the same CNN with ReLU maps fully: the test below).
    assert fallback.advice == rules.REPLACEMENTS["LEAKY_RELU"] and "ReLU" in fallback.advice
    assert {r.advice for r in after} == {f"nothing of its own: it maps once op {fallback.index} LEAKY_RELU does"}


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
    # Float I/O left: both wrappers say to convert with uint8 input and output (the test above: then it maps fully).
    assert first.advice.startswith("float input left") and last.advice.startswith("float output left")
    assert "inference_input_type" in first.advice and "tf.uint8" in last.advice


@pytest.mark.host
def test_dynamic_batch_is_flagged_and_the_fixed_shape_advised_maps_fully():
    model = _cnn()
    result = analyze(int8_tflite(model, 16, batch=None))
    flagged = [r for r in result.rows if "dynamic size" in r.reason]
    assert flagged and flagged[0].status == rules.OTHER_LIMITATION
    assert "-1" in flagged[0].reason and not result.fully_mapped
    assert "dynamic-sized tensor" in result.fatal and "batch of 1" in result.fatal
    # The change names the fixed input shape; the same model converted at that shape maps fully.
    advised = "export at a fixed batch of 1 with input shape [1, 16, 16, 3]"
    assert flagged[0].advice.startswith(advised) and advised in result.fatal and "height and width" not in flagged[0].advice
    assert analyze(int8_tflite(model, 16, batch=1)).fully_mapped


@pytest.mark.host
def test_five_dimensional_tensor_is_flagged():
    import tensorflow as tf

    # A max over a group axis in 5-D: the converter cannot fold this reshape away.
    five_d = keras.layers.Lambda(lambda t: tf.reduce_max(tf.reshape(t, [1, 2, 8, 16, 8]), axis=1))
    result = analyze(int8_tflite(_cnn(five_d), 16))
    rank = [r for r in result.rows if r.status == rules.UNSUPPORTED_RANK]
    assert rank and "[1, 2, 8, 16, 8]" in rank[0].reason
    assert result.first_fallback == rank[0]
    assert "a reshape of lower rank" in rank[0].advice and "[1, 2, 8, 16, 8] -> [1, 16, 16, 8]" in rank[0].advice


@pytest.mark.host
def test_batch_8_is_flagged_by_the_rank_rule():
    result = analyze(int8_tflite(_cnn(), 16, batch=8))
    assert result.first_fallback.status == rules.UNSUPPORTED_RANK and "[8, 16, 16" in result.first_fallback.reason
    assert result.first_fallback.advice.startswith("export at batch 1, input shape [1, 16, 16, 3]")


def test_pooling_with_fused_activation_is_flagged():
    # A real AVERAGE_POOL_2D (Google's MobileNet), once as written and once with a fused RELU.
    data = (REFERENCE / "mobilenet_v1_0.25_128_quant.tflite").read_bytes()
    info = read_model(data)
    pool = next(op for op in info.ops if op.name == "AVERAGE_POOL_2D")
    assert pool.options["fused_activation_function"] == "NONE" and check_op(pool, info, data) is None
    fused = pool._replace(options=dict(pool.options, fused_activation_function="RELU"))
    status, reason, advice = check_op(fused, info, data)
    assert status == rules.OTHER_LIMITATION and "fused RELU" in reason
    assert advice.startswith("keep the RELU out of AVERAGE_POOL_2D") and "before the op" in advice


@pytest.mark.host
def test_unsupported_op_on_one_branch_leaves_the_other_branch_mapped():
    # Two heads on one trunk: LEAKY_RELU (not supported) on one, a convolution on the other.
    inputs = keras.Input((16, 16, 3))
    trunk = keras.layers.Conv2D(8, 3, padding="same")(keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs))
    leaky = keras.layers.Conv2D(4, 1)(keras.layers.LeakyReLU(0.1)(trunk))
    plain = keras.layers.Conv2D(4, 1)(trunk)
    result = analyze(int8_tflite(keras.Model(inputs, [leaky, plain]), 16))
    fallback = result.first_fallback
    assert fallback.op == "LEAKY_RELU" and fallback.status == rules.NOT_SUPPORTED
    downstream = [r for r in result.rows if "reads the output of op" in r.reason]
    assert [r.op for r in downstream] == ["CONV_2D", "QUANTIZE"]  # the LEAKY_RELU head, to its output
    assert {r.status for r in downstream} == {rules.MORE_THAN_ONE_SUBGRAPH}
    # The other head maps although part of it comes after LEAKY_RELU in the file: not file order.
    later_mapped = [r for r in result.rows if r.index > fallback.index and r.on_edgetpu]
    assert later_mapped and result.ops_on_cpu == 3
