"""The pre-flight's advice: for each op that would leave the Edge TPU, the rule it breaks and what to change, and
that following the change makes the model map (activation, tail, fixed shape, op version, runtime).

The models are Google's reference models, the suite's fixtures, real files edited where the file stores one fact,
and tiny Keras models converted to int8 here (each conversion costs a few seconds: one model breaks several rules).
"""
from __future__ import annotations

import json
from typing import NamedTuple

import pytest

from edge.model.tflite_file import read_model
from pipeline.edgetpu import rules
from pipeline.edgetpu.checks import check_op
from pipeline.edgetpu.preflight import analyze, table
from tests.support.helpers import REPO, int8_tflite

FIXTURES = REPO / "tests" / "fixtures"
REFERENCE = REPO.parent / "shared" / "reference" / "coral"
DEEPLAB = REFERENCE / "deeplabv3_mnv2_dm05_pascal_quant.tflite"


def _cli(*args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def test_check_only_prints_each_problem_once_with_its_change():
    """DeepLab: a 1x1 resize ends the segment, what reads it follows it to the CPU, ARG_MAX is a tail to cut."""
    result = _cli("compile", DEEPLAB, "--check-only", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    printed = result.stderr
    assert "What to change" in printed
    entries = report["advice"]
    cpu = [op["index"] for op in report["ops"] if not op["on_edgetpu"]]
    assert sorted(i for e in entries for i in e["ops"]) == cpu  # every op on the CPU, in exactly one entry
    first = entries[0]
    assert first["first"] == report["first_fallback"]["index"] == first["ops"][0] and first["op"] == "RESIZE_BILINEAR"
    assert "RESIZE_NEAREST_NEIGHBOR" in first["advice"]
    argmax = next(e for e in entries if e["op"] == "ARG_MAX")
    # The tensor ARG_MAX reads is the output of the model cut before it.
    reads = [read_model(DEEPLAB).tensor(t).name for t in read_model(DEEPLAB).ops[argmax["ops"][0]].inputs[:1]]
    assert argmax["advice"].startswith(f"cut the tail: end the model before op {argmax['ops'][0]} ARG_MAX, with {reads[0]!r}")
    following = [e for e in entries if e["status"] == rules.MORE_THAN_ONE_SUBGRAPH]
    assert len(following) == 1 and following[0]["advice"] == f"nothing of its own: it maps once op {first['ops'][0]} RESIZE_BILINEAR does"
    for e in entries:  # the printed table says the same, entry by entry
        assert f"  {e['heading']}: {e['status']}: {e['reason']}\n      change: {e['advice']}" in printed


def test_require_full_mapping_names_the_first_change():
    result = _cli("compile", DEEPLAB, "--check-only", "--require-full-mapping")
    assert result.exit_code == 1
    first = analyze(DEEPLAB).advice()[0]
    assert "--require-full-mapping: not every op maps" in result.output
    assert f"first change: {first['heading']}: {first['advice']}" in result.output


def test_pipeline_run_require_full_mapping_fails_at_the_end_with_the_change(tmp_path, monkeypatch):
    """`pipeline run` stage by stage, training, export and parity stood in for (their own tests cover them): the real
    pre-flight of a run holding DeepLab, then parity still runs, then the gate refuses, naming the change."""
    from pipeline import end_to_end, export, parity, tasks
    from pipeline.errors import PipelineError
    from tests.pipeline.test_compile import PARTIAL, reference_run

    class Exported(NamedTuple):
        table: str = ""
        notes: tuple = ()
        failures: tuple = ()

    class Parity(NamedTuple):
        passed: bool = True
        failures: tuple = ()

    class Task(NamedTuple):
        def end_summary(self, run, result):
            return []

    ran = []
    run_dir = reference_run(tmp_path, PARTIAL)
    monkeypatch.setenv("PATH", str(tmp_path / "no-compiler"))
    monkeypatch.setattr(end_to_end, "_train_or_reuse", lambda config, run_dir, say: None)
    monkeypatch.setattr(export, "export_model", lambda config, run_dir: Exported())
    monkeypatch.setattr(parity, "check_parity", lambda config, run_dir: ran.append("parity") or Parity())
    monkeypatch.setattr(tasks, "of_run", lambda run: Task())
    assert end_to_end.run_all(end_to_end.RunConfig(), run_dir, say=lambda line: None).passed  # no flag: passes
    with pytest.raises(PipelineError) as refused:
        end_to_end.run_all(end_to_end.RunConfig(require_full_mapping=True), run_dir, say=lambda line: None)
    assert ran == ["parity", "parity"]  # parity ran before the gate refused
    first = analyze(run_dir / "model_int8.tflite").advice()[0]
    assert str(refused.value).startswith("--require-full-mapping: not every op maps to the Edge TPU")
    assert f"first change: {first['heading']}: {first['advice']}" in str(refused.value)


def test_the_end_summary_names_the_first_change(tmp_path):
    from pipeline.inference.summary import edgetpu_mapping
    from pipeline.rundir.run import Run
    from tests.pipeline.test_compile import FULL, PARTIAL, reference_run

    partial, full = reference_run(tmp_path, PARTIAL, "partial"), reference_run(tmp_path, FULL, "full")
    for run_dir in (partial, full):
        assert _cli("compile", run_dir, "--check-only").exit_code == 0
    first = analyze(partial / "model_int8.tflite").advice()[0]
    assert edgetpu_mapping(Run.open(partial)).endswith(f"; first change: {first['heading']}: {first['advice']}")
    assert "change" not in edgetpu_mapping(Run.open(full))  # fully mapped: nothing to change


def test_a_report_from_before_the_advice_still_renders(tmp_path):
    """An edgetpu.json written before the advice existed: the page renders, without the table."""
    from pipeline.report import render
    from tests.support.helpers import record_artifact
    from tests.pipeline.test_compile import PARTIAL, reference_run

    run_dir = reference_run(tmp_path, PARTIAL)
    assert _cli("compile", run_dir, "--check-only").exit_code == 0
    assert 'data-table="advice"' in render(run_dir)
    report = json.loads((run_dir / "edgetpu.json").read_text())
    pre = report["preflight"]
    del pre["advice"]
    for op in pre["ops"] + [pre["first_fallback"]]:
        op.pop("advice"), op.pop("follows")
    (run_dir / "edgetpu.json").write_text(json.dumps(report))
    record_artifact(run_dir, "edgetpu_report", run_dir / "edgetpu.json")
    page = render(run_dir)
    assert 'data-table="advice"' not in page and "First fallback: op" in page and "Change:" not in page


def test_custom_decoder_is_a_tail_to_cut_naming_what_it_reads():
    model = REFERENCE / "posenet_mobilenet_v1_075_353_481_quant_decoder.tflite"
    decoder = next(r for r in analyze(model).rows if r.custom)
    info = read_model(model)
    read = [repr(info.tensor(t).name) for t in info.ops[decoder.index].inputs if not info.tensor(t).is_constant]
    assert decoder.advice == (f"cut the tail: end the model before op {decoder.index} {decoder.op}, with {', '.join(read)} "
                              f"as its output(s), and run {decoder.op} on the host (no weights there)")


@pytest.mark.parametrize("model, runtime", [(FIXTURES / "tiny_int8.tflite", 11), (DEEPLAB, 11),
                                            (REFERENCE / "keras_lstm_mnist_ptq.tflite", 11)])
def test_an_older_runtime_is_told_the_runtime_that_maps_it(model, runtime):
    """QUANTIZE, the dilated depthwise convolution and the LSTM need runtime 12: the advice says so, and at 12 they map."""
    before = {r.index: r for r in analyze(model, runtime=runtime).rows}
    at_12 = analyze(model, runtime=12).rows
    told = [r for r in before.values() if "--min-runtime-version 12" in r.advice]
    assert told and all(r.status != rules.MAPPED for r in told)
    # At 12 none of them has a problem of its own (in DeepLab one QUANTIZE still follows the 1x1 resize to the CPU).
    assert all(at_12[r.index].on_edgetpu or at_12[r.index].status == rules.MORE_THAN_ONE_SUBGRAPH for r in told)


def test_a_version_the_compiler_cannot_parse_says_what_wrote_it():
    from tests.pipeline.edgetpu.test_preflight import _with_op_version

    # CONV_2D v6 written into the fixture: nothing in the file explains it, so the advice is the version to write.
    data = _with_op_version((FIXTURES / "tiny_int8.tflite").read_bytes(), "CONV_2D", 6)
    conv = next(r for r in analyze(data).rows if r.op == "CONV_2D")
    assert conv.advice.startswith("convert so CONV_2D is written at v5 or lower")
    assert conv.advice in analyze(data).fatal
    # EXP v2 where the softmax was: no EXP maps at any version, and nothing learned follows it: a tail to cut.
    data = (FIXTURES / "tiny_int8.tflite").read_bytes()
    info = read_model(data)
    softmax = next(op for op in info.ops if op.name == "SOFTMAX")
    exp = softmax._replace(name="EXP", version=2)
    status, _, advice = check_op(exp, info._replace(ops=[exp if o.index == exp.index else o for o in info.ops]), data)
    assert status == rules.VERSION_NOT_SUPPORTED
    assert advice.startswith(f"cut the tail: end the model before op {exp.index} EXP, with "
                             f"{info.tensor(softmax.inputs[0]).name!r} as its output(s)")


def test_a_softmax_too_large_is_told_an_input_size_at_which_it_fits():
    data = (FIXTURES / "tiny_int8.tflite").read_bytes()
    info = read_model(data)
    softmax = next(op for op in info.ops if op.name == "SOFTMAX")
    image = info.tensor(info.inputs[0]).shape
    scores = info.tensor(softmax.inputs[0])
    elements = 2 * rules.SOFTMAX_MAX_ELEMENTS  # as a per-position softmax would have at a larger input
    tensors = list(info.tensors)
    tensors[scores.index] = scores._replace(shape=(1, elements))
    status, reason, advice = check_op(softmax, info._replace(tensors=tensors), data)
    assert status == rules.OTHER_LIMITATION and f"SOFTMAX over {elements} elements" in reason
    assert "an input size at which it fits" in advice
    size = [int(d) for d in advice.split("fits: ")[1].split(" ")[0].split("x")]
    assert size[0] * size[1] * elements / (image[1] * image[2]) <= rules.SOFTMAX_MAX_ELEMENTS  # it does fit


# --- tiny Keras models, converted to int8 here -------------------------------------------------------------

keras = pytest.importorskip("tf_keras", reason="building test models needs tf-keras (host side)")


def _cnn(activation=None, tail=None):
    """Conv, an activation, conv, pooling, Dense named `logits`, and an optional tail after it."""
    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    if activation is not None:
        x = keras.layers.Conv2D(8, 3, padding="same")(x)
        x = keras.layers.Activation(activation)(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.Dense(4, name="logits")(keras.layers.GlobalAveragePooling2D()(x))
    return keras.Model(inputs, tail(x) if tail is not None else x)


@pytest.mark.host
def test_hard_swish_is_told_relu6_or_swish_and_both_map():
    import tensorflow as tf

    def hard_swish(x):
        return x * tf.nn.relu6(x + 3.0) / 6.0  # what the converter fuses into HARD_SWISH

    result = analyze(int8_tflite(_cnn(hard_swish), 16))
    first = result.first_fallback
    assert first.op == "HARD_SWISH" and first.status == rules.NOT_SUPPORTED
    assert "ReLU6 (keras.layers.ReLU(6.0))" in first.advice and "tf.nn.silu" in first.advice
    # Following the advice: the same model with either activation maps fully.
    assert analyze(int8_tflite(_cnn(keras.layers.ReLU(6.0)), 16)).fully_mapped
    assert analyze(int8_tflite(_cnn(tf.nn.silu), 16)).fully_mapped


@pytest.mark.host
def test_a_tail_is_told_where_to_cut_and_the_cut_model_maps():
    import tensorflow as tf

    model = _cnn(tail=keras.layers.Lambda(lambda t: tf.math.argmax(t, axis=-1)))
    result = analyze(int8_tflite(model, 16))
    first = result.first_fallback
    assert first.op == "ARG_MAX" and first.status == rules.NOT_SUPPORTED and first.index == len(result.rows) - 1
    assert first.advice.startswith(f"cut the tail: end the model before op {first.index} ARG_MAX, with '")
    # Following the advice: end the model at the layer whose output the advice names.
    cut_at = first.advice.split("with '")[1].split("'")[0]
    layer = next(layer for layer in model.layers if f"/{layer.name}/" in cut_at)
    assert layer.name == "logits"
    assert analyze(int8_tflite(keras.Model(model.input, layer.output), 16)).fully_mapped


@pytest.mark.host
def test_a_grouped_convolution_is_told_to_split_and_the_split_maps():
    import tensorflow as tf

    def model(grouped: bool):
        inputs = keras.Input((16, 16, 3))
        x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
        if grouped:
            x = keras.layers.Conv2D(8, 3, padding="same", groups=2)(x)
        else:  # as advised: 2 convolutions on a split of the input, joined by concatenation
            halves = keras.layers.Lambda(lambda t: tf.split(t, 2, axis=-1))(x)
            x = keras.layers.Concatenate()([keras.layers.Conv2D(4, 3, padding="same")(h) for h in halves])
        return keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(x))

    result = analyze(int8_tflite(model(True), 16))
    grouped = [r for r in result.rows if "grouped convolution" in r.advice]
    assert grouped and {r.status for r in grouped} == {rules.VERSION_NOT_SUPPORTED}
    assert "(2 groups of 4 input channels)" in grouped[0].advice and "SPLIT" in grouped[0].advice
    assert result.fatal.startswith("Model could not be parsed") and "grouped convolution" in result.fatal
    assert analyze(int8_tflite(model(False), 16)).fully_mapped


@pytest.mark.host
def test_one_model_breaking_five_rules_gets_each_op_its_rule_and_change():
    """Each branch breaks one rule of Coral's table; every op is checked on its own, so each says its own."""
    import tensorflow as tf

    layers = keras.layers
    inputs = keras.Input((16, 16, 3))
    x = layers.Conv2D(6, 3, padding="same", activation="relu")(inputs)
    outputs = [
        layers.Lambda(lambda t: t[:, ::2, ::2, :])(x),  # STRIDED_SLICE, stride 2
        layers.Lambda(lambda t: tf.reduce_mean(t, axis=-1, keepdims=True))(x),  # MEAN over 6 channels
        layers.Conv2D(4, 3, dilation_rate=(1, 2), padding="same")(x),  # CONV_2D dilated 1x2
        layers.Softmax()(layers.Conv2D(4, 1)(x)),  # SOFTMAX over a 16x16x4 map
        layers.Conv2D(4, 1)(layers.ELU()(layers.Conv2D(4, 1)(x))),  # ELU: the converter keeps it in float
    ]
    result = analyze(int8_tflite(keras.Model(inputs, outputs), 16))
    by_op = {}
    for r in result.rows:
        if not r.on_edgetpu and r.status != rules.MORE_THAN_ONE_SUBGRAPH:
            by_op.setdefault(r.op, r)
    expected = {
        "STRIDED_SLICE": (rules.STRIDED_SLICE_STRIDES, "MaxPool2D(pool_size=1, strides=k)"),
        "MEAN": (rules.OTHER_LIMITATION, "give the layer before it 8 channels"),
        "CONV_2D": (rules.OTHER_LIMITATION, "use one dilation rate in both directions (2x2 or 1x1)"),
        "SOFTMAX": (rules.OTHER_LIMITATION, "reshape to [1, 1024] before the softmax"),
        "DEQUANTIZE": (rules.UNSUPPORTED_DTYPE, "ELU runs in float after it: " + rules.REPLACEMENTS["ELU"]),
        "ELU": (rules.NOT_SUPPORTED, rules.REPLACEMENTS["ELU"]),
    }
    assert set(expected) <= set(by_op), table(result)
    for op, (status, advice) in expected.items():
        assert by_op[op].status == status and advice in by_op[op].advice, (op, by_op[op])
