"""`pipeline compile`: the pre-flight report, the compiler call, and the check of what it wrote.

The real edgetpu_compiler is not installable here (x86-64 Linux from Coral's apt repository).
tests/doubles/edgetpu_compiler_double.py stands in for it: the models it writes are real (for the
CPU models in ../shared/reference/coral/ their compiled twins, made by Google's compiler; for
anything else a failure), its console text and .log are made up (and say so). So the runs compiled
here hold a reference CPU model as their int8 model, and the tests check what the stage derives
from the real compiled files, never the double's text. `test_real_compiler` runs only where the
real compiler is on PATH.
"""
from __future__ import annotations

import json
import shutil
import stat
import sys
from collections import Counter

import pytest

from edge.pixels.contract import PixelContract
from edge.pixels.preprocess import PYCORAL_DEFAULT
from edge.model.tflite_file import cpu_ops, io_signatures, is_edgetpu_compiled, read_model
from pipeline.rundir import manifest as manifest_mod
from pipeline.rundir.run import Run
from tests.support.helpers import REPO, record_artifact

DOUBLE = REPO / "tests" / "doubles" / "edgetpu_compiler_double.py"
REFERENCE = REPO.parent / "shared" / "reference" / "coral"
FULL = "mobilenet_v1_0.25_128_quant"  # the compiler mapped every op (its twin has only the custom op)
PARTIAL = "deeplabv3_mnv2_dm05_pascal_quant"  # the compiler left ops on the CPU


def reference_run(tmp_path, name, folder="run"):
    """A run directory whose int8 model is the reference CPU model `name` (copied into tmp_path only)."""
    run_dir = tmp_path / folder
    run_dir.mkdir()
    shutil.copyfile(REFERENCE / f"{name}.tflite", run_dir / "model_int8.tflite")
    shape = read_model(run_dir / "model_int8.tflite").tensors[read_model(run_dir / "model_int8.tflite").inputs[0]].shape
    manifest = manifest_mod.new(labels=["background", "other"], model={"image_size": shape[1]},
                                preprocessing=PixelContract(PYCORAL_DEFAULT).as_record())  # how Coral feeds its models
    record_artifact(run_dir, "model_int8", run_dir / "model_int8.tflite", manifest=manifest)
    return run_dir


@pytest.fixture
def double(tmp_path, monkeypatch):
    """An executable named like the compiler that runs the double; returns (path, args file)."""
    path = tmp_path / "bin" / "edgetpu_compiler"
    path.parent.mkdir()
    # A Python script whose #! line is this interpreter: runs the double as if it were the program.
    path.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(DOUBLE)!r}, run_name='__main__')\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    args_file = tmp_path / "args.json"
    monkeypatch.setenv("EDGETPU_DOUBLE_ARGS", str(args_file))
    monkeypatch.delenv("EDGETPU_DOUBLE_MODE", raising=False)
    return path, args_file


def _compile(*args, env=None):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, ["compile", *map(str, args)], env=env)


def _manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def _assert_nothing_compiled(run_dir):
    assert not list(run_dir.glob("*_edgetpu.tflite*")) and not list(run_dir.glob("*_edgetpu.log"))
    assert not [k for k in _manifest(run_dir)["artifacts"] if k.startswith("model_int8_edgetpu")]
    assert not list(run_dir.glob(".compile-*"))


def test_check_only_writes_the_prediction(tmp_path):
    run_copy = reference_run(tmp_path, FULL)
    result = _compile(run_copy, "--check-only", "--require-full-mapping")
    assert result.exit_code == 0, result.output
    assert "Operator" in result.stderr and "ops predicted on the Edge TPU (100%)" in result.stderr
    report = json.loads((run_copy / "edgetpu.json").read_text())
    assert report["preflight"]["ops_on_cpu"] == 0 and report["compiler"] is None
    assert report["preflight"]["total_ops"] == len(read_model(REFERENCE / f"{FULL}.tflite").ops)
    assert _manifest(run_copy)["artifacts"]["edgetpu_report"]["path"] == "edgetpu.json"


def test_compiler_missing_says_what_it_knows_and_how_to_get_it(tmp_path):
    run_copy = reference_run(tmp_path, FULL)
    result = _compile(run_copy, env={"PATH": str(tmp_path / "empty")})
    assert result.exit_code == 2
    assert "edgetpu_compiler not found" in result.output
    assert "pre-flight: " in result.output and "apt-get install edgetpu-compiler" in result.output
    assert "--check-only" in result.output
    _assert_nothing_compiled(run_copy)


def test_successful_compile_installs_the_real_compiled_model(tmp_path, double):
    run_copy = reference_run(tmp_path, FULL)
    compiler, args_file = double
    result = _compile(run_copy, "--compiler", compiler, "--min-runtime-version", "14", "--search-delegate",
                      "--delegate-search-step", "3")
    assert result.exit_code == 0, result.output
    args = json.loads(args_file.read_text())
    assert args[:2] == ["-s", "-o"] and args[args.index("-t") + 1] == "180"
    assert args[args.index("-m") + 1] == "14" and "-d" in args and args[args.index("-k") + 1] == "3"
    manifest = manifest_mod.load(run_copy)
    model = Run.open(run_copy).artifact("model_int8_edgetpu")  # sha256 checked
    assert model.name == "model_int8_edgetpu.tflite"
    assert model.read_bytes() == (REFERENCE / f"{FULL}_edgetpu.tflite").read_bytes()
    assert is_edgetpu_compiled(read_model(model))
    assert manifest["artifacts"]["model_int8_edgetpu"]["compiled_from"] == manifest["artifacts"]["model_int8"]["sha256"]
    sidecar = json.loads((run_copy / "model_int8_edgetpu.tflite.json").read_text())
    assert sidecar["sha256"] == manifest["artifacts"]["model_int8_edgetpu"]["sha256"]
    assert sidecar["schema_version"] == 1 and sidecar["model"] == "model_int8_edgetpu.tflite"
    assert sidecar["labels"] == manifest["labels"] and sidecar["image_size"] == manifest["model"]["image_size"]
    assert sidecar["preprocessing"] == manifest["preprocessing"]  # the device feeds the compiled model by the same contract
    report = json.loads((run_copy / "edgetpu.json").read_text())
    assert report["compiler"]["path"] == str(compiler)
    # The real twin keeps no op outside edgetpu-custom-op, and the pre-flight predicted every op on the Edge TPU:
    # they agree. The double gives no operator table (no file holds the compiler's statuses), so none was read.
    assert report["compiled"][0]["cpu_ops"] == [] and report["compiled"][0]["log_table_read"] is False
    assert report["preflight"]["ops_on_cpu"] == 0 and report["disagreements"] == []
    # Without a table to read, --require-full-mapping refuses rather than pass on counts it never saw.
    shutil.rmtree(run_copy)
    run_copy = reference_run(tmp_path, FULL)
    result = _compile(run_copy, "--compiler", compiler, "--require-full-mapping")
    assert result.exit_code == 1 and "cannot read the op counts" in result.output
    _assert_nothing_compiled(run_copy)


def test_the_double_says_its_text_is_made_up(tmp_path):
    """Its console and .log name no real compiler version and say in their first line that no compiler ran."""
    import re
    import subprocess

    model = tmp_path / "m.tflite"
    shutil.copyfile(REFERENCE / f"{FULL}.tflite", model)
    result = subprocess.run([sys.executable, str(DOUBLE), "-s", "-o", str(tmp_path), "-t", "180", str(model)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m_edgetpu.tflite").read_bytes() == (REFERENCE / f"{FULL}_edgetpu.tflite").read_bytes()
    for text in (result.stdout, (tmp_path / "m_edgetpu.log").read_text()):
        first = text.splitlines()[0]
        assert "TEST DOUBLE" in first and "no compiler ran" in first and "made up" in first
        assert not re.search(r"Edge TPU Compiler version \d", text)  # a compiler's version would claim a compiler ran


def test_partial_mapping_is_read_from_the_compiled_file(tmp_path, double):
    run_copy = reference_run(tmp_path, PARTIAL)
    compiler, _ = double
    result = _compile(run_copy, "--compiler", compiler)
    assert result.exit_code == 0, result.output
    report = json.loads((run_copy / "edgetpu.json").read_text())
    twin_cpu = [op.name for op in cpu_ops(read_model(REFERENCE / f"{PARTIAL}_edgetpu.tflite"))]
    assert len(twin_cpu) > 0 and report["compiled"][0]["cpu_ops"] == twin_cpu
    predicted = Counter(r["op"] for r in report["preflight"]["ops"] if not r["on_edgetpu"])
    assert report["disagreements"] == [] and predicted == Counter(twin_cpu)
    # Full mapping required: the same compile is refused, and nothing is installed.
    shutil.rmtree(run_copy)
    run_copy = reference_run(tmp_path, PARTIAL)
    result = _compile(run_copy, "--compiler", compiler, "--require-full-mapping")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"keeps {len(twin_cpu)} op(s) on the CPU" in result.output
    _assert_nothing_compiled(run_copy)


@pytest.mark.parametrize("mode, message", [
    ("unchanged", "without an edgetpu-custom-op: it is not an Edge TPU model"),
    ("mixup", "expected the source model's"),
])
def test_output_that_is_not_the_compiled_model_is_refused(tmp_path, double, monkeypatch, mode, message):
    run_copy = reference_run(tmp_path, FULL)
    compiler, _ = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", mode)
    before = (run_copy / "manifest.json").read_bytes()
    result = _compile(run_copy, "--compiler", compiler)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert message in result.output and "Traceback" not in result.output
    _assert_nothing_compiled(run_copy)
    assert (run_copy / "manifest.json").read_bytes() == before and not (run_copy / "edgetpu.json").exists()


def test_output_needing_a_newer_runtime_than_asked_is_refused(tmp_path, double):
    # Google's compiled MobileNet carries a package that needs runtime 12: fine for -m 12, not for -m 11.
    compiler, _ = double
    run_copy = reference_run(tmp_path, FULL)
    result = _compile(run_copy, "--compiler", compiler, "--min-runtime-version", "11")
    assert result.exit_code == 1 and "needs Edge TPU runtime 12, newer than --min-runtime-version 11" in result.output
    _assert_nothing_compiled(run_copy)
    assert _compile(run_copy, "--compiler", compiler, "--min-runtime-version", "12").exit_code == 0
    assert json.loads((run_copy / "edgetpu.json").read_text())["compiled"][0]["min_runtime_version"] == 12


def test_unreadable_log_never_passes_full_mapping(tmp_path, double, monkeypatch):
    run_copy = reference_run(tmp_path, FULL)
    compiler, _ = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "cut-log")
    result = _compile(run_copy, "--compiler", compiler, "--require-full-mapping")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "cannot read the op counts" in result.output and "model_int8_edgetpu.log" in result.output
    _assert_nothing_compiled(run_copy)
    # Without the requirement the same real model is installed; the report says the table was not read.
    result = _compile(run_copy, "--compiler", compiler)
    assert result.exit_code == 0, result.output
    assert json.loads((run_copy / "edgetpu.json").read_text())["compiled"][0]["log_table_read"] is False


def test_model_the_compiler_cannot_compile_leaves_the_run_as_it_was(tmp_path, double):
    # A CPU model with no real compiled twin: the double fails as the real compiler does without a reason.
    run_copy = reference_run(tmp_path, "model_invoking_error")
    compiler, _ = double
    before = (run_copy / "manifest.json").read_bytes()
    result = _compile(run_copy, "--compiler", compiler)
    assert result.exit_code == 1
    # "Compilation failed!" is the real compiler's own last line for a failure without a reason (EDGETPU.md 6).
    assert "edgetpu_compiler exited with code 1" in result.output and "Compilation failed!" in result.output
    _assert_nothing_compiled(run_copy)
    assert (run_copy / "manifest.json").read_bytes() == before
    assert not (run_copy / "edgetpu.json").exists()


def test_failure_keeps_an_earlier_compiled_model(tmp_path, double, monkeypatch):
    run_copy = reference_run(tmp_path, FULL)
    compiler, _ = double
    assert _compile(run_copy, "--compiler", compiler).exit_code == 0
    kept = {name: (run_copy / name).read_bytes() for name in
            ("model_int8_edgetpu.tflite", "model_int8_edgetpu.tflite.json", "edgetpu.json", "manifest.json")}
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "unchanged")
    result = _compile(run_copy, "--compiler", compiler)
    assert result.exit_code == 1 and "not an Edge TPU model" in result.output
    # --check-only afterwards does not replace the compiler's report either.
    result = _compile(run_copy, "--check-only")
    assert result.exit_code == 0 and "kept" in result.output
    assert {name: (run_copy / name).read_bytes() for name in kept} == kept  # nothing already written is lost


def test_the_allowed_post_processing_tail_is_googles_own_ssd_tail():
    """The integer-only check lets a detector end in float post-processing: exactly what Google's compiled SSD keeps
    on the CPU after its Edge TPU op (two DEQUANTIZE and TFLite_Detection_PostProcess), and nothing in a segment
    without it."""
    from pipeline.quant.verify import postprocess_tail

    second = read_model(REFERENCE / "ssd_mobilenet_v1_coco_quant_postprocess_segment_1_of_2_edgetpu.tflite")
    assert [second.ops[i].name for i in sorted(postprocess_tail(second))] == \
        ["DEQUANTIZE", "DEQUANTIZE", "TFLite_Detection_PostProcess"]
    assert postprocess_tail(read_model(REFERENCE / "ssd_mobilenet_v1_coco_quant_postprocess_segment_0_of_2_edgetpu.tflite")) == set()


def test_real_segments_chain_and_a_wrong_order_is_refused():
    from pipeline.edgetpu.compiled_check import check_chain, read_compiled
    from pipeline.errors import PipelineError

    segments = [read_compiled(REFERENCE / f"ssd_mobilenet_v1_coco_quant_postprocess_segment_{k}_of_2_edgetpu.tflite")
                for k in range(2)]
    first_inputs, _ = io_signatures(read_model(REFERENCE / "ssd_mobilenet_v1_coco_quant_postprocess_segment_0_of_2_edgetpu.tflite"))
    check_chain(segments, first_inputs)  # Google's own two segments chain
    assert segments[0].cpu_ops == [] and "TFLite_Detection_PostProcess" in segments[1].cpu_ops
    with pytest.raises(PipelineError, match="segment 0 .* needs input"):
        check_chain(list(reversed(segments)), first_inputs)
    other = read_compiled(REFERENCE / f"{FULL}_edgetpu.tflite")
    with pytest.raises(PipelineError, match="do not chain"):
        check_chain([segments[0], other], first_inputs)


def test_segment_order_is_numeric():
    from pathlib import Path

    from pipeline.compile import _segment_number

    names = [f"m_segment_{k}_of_12_edgetpu.tflite" for k in (10, 2, 0, 11, 1)]
    assert [_segment_number(Path(n)) for n in sorted(names, key=lambda n: _segment_number(Path(n)))] == [0, 1, 2, 10, 11]


def test_compiler_timing_out_is_killed(tmp_path, double, monkeypatch):
    run_copy = reference_run(tmp_path, FULL)
    compiler, _ = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "hang")
    result = _compile(run_copy, "--compiler", compiler, "--timeout", "1")
    assert result.exit_code == 1
    assert "did not finish within 2 s" in result.output
    _assert_nothing_compiled(run_copy)


def test_compiler_that_is_not_executable(tmp_path):
    run_copy = reference_run(tmp_path, FULL)
    fake = tmp_path / "edgetpu_compiler"
    fake.write_text("not a program")
    result = _compile(run_copy, "--compiler", fake)
    assert result.exit_code == 1 and "is not an executable file" in result.output


def test_changed_int8_model_is_refused(tmp_path):
    run_copy = reference_run(tmp_path, FULL)
    with open(run_copy / "model_int8.tflite", "ab") as f:
        f.write(b"\0")
    result = _compile(run_copy, "--check-only")
    assert result.exit_code == 1 and "changed after it was recorded" in result.output


def test_bare_file_full_compile_is_refused_and_check_only_writes_nothing(tmp_path):
    model = tmp_path / "m.tflite"
    shutil.copyfile(REFERENCE / f"{FULL}.tflite", model)
    result = _compile(model)
    assert result.exit_code == 1 and "needs a run directory" in result.output and "--check-only" in result.output
    result = _compile(model, "--check-only", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["total_ops"] == len(read_model(model).ops)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tflite"]


@pytest.mark.parametrize("content, message", [(b"not a model", "not a TFLite model"), (None, "does not exist")])
def test_bad_bare_file_is_refused_without_traceback(tmp_path, content, message):
    model = tmp_path / "m.tflite"
    if content is not None:
        model.write_bytes(content)
    result = _compile(model, "--check-only", "--json")
    assert result.exit_code == 1 and message in result.stderr and result.stdout == ""
    assert isinstance(result.exception, SystemExit)


@pytest.fixture
def run_copy(exported_run, tmp_path):
    shutil.copytree(exported_run, tmp_path / "run")
    return tmp_path / "run"


@pytest.mark.host
@pytest.mark.compiler
def test_real_compiler(run_copy):
    result = _compile(run_copy)
    assert result.exit_code == 0, result.output
    from edge.model.tflite_file import is_edgetpu_compiled, read_model

    assert is_edgetpu_compiled(read_model(run_copy / "model_int8_edgetpu.tflite"))
    report = json.loads((run_copy / "edgetpu.json").read_text())
    assert report["compiler"]["ops_on_cpu"] == 0


# Every registry model, exported int8 by `pipeline export` through the real stages, is predicted fully mapped and
# passes `compile --check-only --require-full-mapping`. Three are checked on runs other tests already train and export
# (a second training of each would check the same ops): small_cnn on the session's exported run (below), MobileNetV2
# 0.35 and MobileNetV3 Small on the BatchNorm photo runs at 96 px (tests/pipeline/training/test_batchnorm.py). The rest are trained
# here, at the smallest size each architecture accepts (affordable on a 2-core CPU; the ops the converter emits do
# not depend on the input size).
BUILT_IN = {"mobilenet_v3_large": (32, ()), "xception": (71, ()), "efficientnet_b0": (32, ())}


@pytest.mark.host
def test_every_registry_model_has_its_mapping_checked():
    import models
    from tests.pipeline.training.test_batchnorm import PHOTO_RUNS

    checked = [*BUILT_IN, "small_cnn", *PHOTO_RUNS]
    assert sorted(checked) == sorted(models.MODEL_NAMES), "a new registry model needs a row in BUILT_IN"
    assert dict(PHOTO_RUNS["mobilenet_v2"][0]) == {"alpha": 0.35}  # the option the Edge TPU case is checked with


def assert_fully_mapped(run_dir):
    """`compile --check-only --require-full-mapping` passes on RUN_DIR's int8 model, and the pre-flight maps every op."""
    from pipeline.edgetpu import preflight

    result = _compile(run_dir, "--check-only", "--require-full-mapping")
    assert result.exit_code == 0, result.output
    prediction = preflight.analyze(run_dir / "model_int8.tflite")
    assert prediction.fully_mapped, preflight.table(prediction)


@pytest.mark.host
def test_the_session_s_small_cnn_export_is_predicted_fully_mapped(run_copy):
    assert _manifest(run_copy)["model"]["name"] == "small_cnn"
    assert_fully_mapped(run_copy)


@pytest.mark.host
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_every_built_in_model_is_predicted_fully_mapped(name, tmp_path):
    """Through the real stages: train (one epoch on a small folder), export --int8, compile --check-only."""
    from pipeline import export, train
    from tests.support.helpers import write_class_folders

    size, options = BUILT_IN[name]
    data = write_class_folders(tmp_path / "data", per_class=4)
    run_dir = train.train_model(train.TrainConfig(data=str(data), model=name, image_size=size, model_options=options,
                                          epochs=1, batch_size=4, heldout_fraction=0.25), tmp_path / "run")
    # No per-layer errors: the int8 file is the same bytes without them (tests/pipeline/test_export.py), at half the export's time.
    export.export_model(export.ExportConfig(mode=export.Mode.INT8, layer_errors=False), run_dir)
    assert_fully_mapped(run_dir)


@pytest.mark.host
@pytest.mark.slow  # builds and converts a MobileNetV3 of its own (docs/testing.md)
def test_full_mobilenet_v3_is_predicted_to_leave_the_edge_tpu_at_its_first_hard_swish(tmp_path):
    """minimalistic=0 is for CPU boards: the pre-flight says so, and --require-full-mapping refuses it."""
    import models
    from pipeline.edgetpu import preflight
    from tests.support.helpers import int8_tflite

    model = tmp_path / "mobilenet_v3_small_full.tflite"
    model.write_bytes(int8_tflite(models.build("mobilenet_v3_small", 3, 32, minimalistic=0), 32))
    prediction = preflight.analyze(model)
    first = prediction.first_fallback
    assert first is not None and first.op == "HARD_SWISH" and "HARD_SWISH" in first.reason
    assert "ReLU6" in first.advice  # the change (tests/pipeline/edgetpu/test_mapping_advice.py shows a CNN so changed maps fully)
    # One entry for all HARD_SWISH ops, one for every op that only follows one of them.
    entries = prediction.advice()
    assert [e["op"] for e in entries[:1]] == ["HARD_SWISH"] and entries[0]["first"] == first.index
    assert len(entries) == 2 and entries[1]["status"] == preflight.rules.MORE_THAN_ONE_SUBGRAPH
    assert sorted(entries[0]["ops"] + entries[1]["ops"]) == [r.index for r in prediction.rows if not r.on_edgetpu]
    assert not any(r.op == "HARD_SWISH" for r in prediction.rows if r.index < first.index)
    # Everything before the first HARD_SWISH maps, it and everything after it stay on the CPU.
    assert [r.on_edgetpu for r in prediction.rows] == [r.index < first.index for r in prediction.rows]
    assert 0 < prediction.ops_on_edgetpu < prediction.ops_on_cpu
    result = _compile(model, "--check-only", "--require-full-mapping")
    assert result.exit_code == 1 and "--require-full-mapping: not every op maps" in result.output
    assert f"falls back to the CPU from op {first.index} HARD_SWISH" in result.output
    assert f"first change: ops {prediction.advice()[0]['where']} HARD_SWISH v{first.version}" in result.output


def test_disagreements_compare_the_prediction_and_the_log_with_the_compiled_file():
    from pipeline.edgetpu import compiler_log, preflight
    from pipeline.edgetpu.agreement import disagreements
    from pipeline.edgetpu.compiled_check import read_compiled

    prediction = preflight.analyze(REFERENCE / f"{PARTIAL}.tflite")
    twin = [read_compiled(REFERENCE / f"{PARTIAL}_edgetpu.tflite")]
    console = "Model compiled successfully in 9 ms.\nNumber of operations that will run on CPU: {}\n"
    assert disagreements(prediction, compiler_log.parse(console.format(8)), twin) == []
    lines = disagreements(prediction, compiler_log.parse(console.format(3)), twin)
    assert lines == ["the compiler's output says 3 op(s) on the CPU, the compiled file(s) keep 8"]
    # A prediction that maps everything disagrees with the real file, op by op.
    full = prediction._replace(rows=[r._replace(on_edgetpu=True, status=preflight.rules.MAPPED) for r in prediction.rows])
    assert "ARG_MAX on the CPU: predicted 0, compiled file 1" in disagreements(full, compiler_log.parse(console.format(8)), twin)
