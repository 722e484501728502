"""`pipeline compile`: the pre-flight report, the compiler call through a test double, and failures.

The real edgetpu_compiler is not installable here (x86-64 Linux from Coral's apt repository);
tests/doubles/edgetpu_compiler_double.py stands in for it to test the call, its timeout and its
failures. `test_real_compiler` runs only where the real one is on PATH.
"""
from __future__ import annotations

import json
import shutil
import stat
import sys

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.host
DOUBLE = REPO / "tests" / "doubles" / "edgetpu_compiler_double.py"


@pytest.fixture
def run_copy(exported_run, tmp_path):
    shutil.copytree(exported_run, tmp_path / "run")
    return tmp_path / "run"


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
    return path, args_file


def _compile(*args, env=None):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, ["compile", *map(str, args)], env=env)


def _manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def _assert_nothing_compiled(run_dir):
    assert not list(run_dir.glob("*_edgetpu.tflite*"))
    assert not [k for k in _manifest(run_dir)["artifacts"] if k.startswith("model_int8_edgetpu")]
    assert not list(run_dir.glob(".compile-*"))


def test_check_only_writes_the_prediction(run_copy):
    result = _compile(run_copy, "--check-only", "--require-full-mapping")
    assert result.exit_code == 0, result.output
    assert "Operator" in result.output and "ops predicted on the Edge TPU (100%)" in result.output
    report = json.loads((run_copy / "edgetpu.json").read_text())
    assert report["preflight"]["ops_on_cpu"] == 0 and report["compiler"] is None
    assert _manifest(run_copy)["artifacts"]["edgetpu_report"]["path"] == "edgetpu.json"


def test_compiler_missing_says_what_it_knows_and_how_to_get_it(run_copy, tmp_path):
    result = _compile(run_copy, env={"PATH": str(tmp_path / "empty")})
    assert result.exit_code == 2
    assert "edgetpu_compiler not found" in result.output
    assert "pre-flight: " in result.output and "apt-get install edgetpu-compiler" in result.output
    assert "--check-only" in result.output
    _assert_nothing_compiled(run_copy)


def test_successful_compile_is_recorded(run_copy, double, monkeypatch):
    compiler, args_file = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "success")
    result = _compile(run_copy, "--compiler", compiler, "--min-runtime-version", "14", "--search-delegate",
                      "--delegate-search-step", "3")
    assert result.exit_code == 0, result.output
    args = json.loads(args_file.read_text())
    assert args[:2] == ["-s", "-o"] and args[args.index("-t") + 1] == "180"
    assert args[args.index("-m") + 1] == "14" and "-d" in args and args[args.index("-k") + 1] == "3"
    from pipeline import manifest as manifest_mod

    manifest = manifest_mod.load(run_copy)
    model = manifest_mod.artifact_path(manifest, run_copy, "model_int8_edgetpu")  # sha256 checked
    assert model.name == "model_int8_edgetpu.tflite"
    assert manifest["artifacts"]["model_int8_edgetpu"]["compiled_from"] == manifest["artifacts"]["model_int8"]["sha256"]
    sidecar = json.loads((run_copy / "model_int8_edgetpu.tflite.json").read_text())
    assert sidecar["sha256"] == manifest["artifacts"]["model_int8_edgetpu"]["sha256"]
    assert sidecar["schema_version"] == 1 and sidecar["model"] == "model_int8_edgetpu.tflite"
    assert sidecar["labels"] == manifest["labels"] and sidecar["image_size"] == manifest["model"]["image_size"]
    assert sidecar["input"] == manifest["artifacts"]["model_int8"]["input"]
    report = json.loads((run_copy / "edgetpu.json").read_text())
    assert report["compiler"]["version"] == "16.0.384591198"
    assert report["compiler"]["ops_on_edgetpu"] == 12 and report["compiler"]["on_chip_used"] == 42752
    assert report["disagreements"] == []  # the double reports what the pre-flight predicts


def test_disagreement_is_visible_and_full_mapping_can_be_required(run_copy, double, monkeypatch):
    compiler, _ = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "partial")
    result = _compile(run_copy, "--compiler", compiler, "--require-full-mapping")
    assert result.exit_code == 1
    assert "pre-flight and compiler disagree: MUL 'Operation not supported': predicted 0, compiler 1" in result.output
    assert "--require-full-mapping" in result.output
    report = json.loads((run_copy / "edgetpu.json").read_text())
    assert report["disagreements"]


@pytest.mark.parametrize("mode, message", [
    ("invalid", "op CONV_2D version 6 is too new"),
    ("silent", "compilation failed (the compiler gave no reason)"),
])
def test_failing_compiler_leaves_the_run_as_it_was(run_copy, double, monkeypatch, mode, message):
    compiler, _ = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", mode)
    before = (run_copy / "manifest.json").read_bytes()
    result = _compile(run_copy, "--compiler", compiler)
    assert result.exit_code == 1
    assert "edgetpu_compiler" in result.output and message in result.output
    _assert_nothing_compiled(run_copy)
    assert (run_copy / "manifest.json").read_bytes() == before
    assert not (run_copy / "edgetpu.json").exists()


def test_failure_keeps_an_earlier_compiled_model(run_copy, double, monkeypatch):
    compiler, _ = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "success")
    assert _compile(run_copy, "--compiler", compiler).exit_code == 0
    kept = {name: (run_copy / name).read_bytes() for name in
            ("model_int8_edgetpu.tflite", "model_int8_edgetpu.tflite.json", "edgetpu.json", "manifest.json")}
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "invalid")
    result = _compile(run_copy, "--compiler", compiler)
    assert result.exit_code == 1 and "too new" in result.output
    assert {name: (run_copy / name).read_bytes() for name in kept} == kept  # nothing already written is lost


def test_segments_are_each_recorded_in_order(run_copy, double, monkeypatch):
    compiler, args_file = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "success")
    result = _compile(run_copy, "--compiler", compiler, "--num-segments", "3")
    assert result.exit_code == 0, result.output
    args = json.loads(args_file.read_text())
    assert args[args.index("-n") + 1] == "3"
    from pipeline import manifest as manifest_mod

    manifest = manifest_mod.load(run_copy)
    assert "model_int8_edgetpu" not in manifest["artifacts"]
    for k in range(3):
        path = manifest_mod.artifact_path(manifest, run_copy, f"model_int8_edgetpu_segment_{k}")
        assert path.name == f"model_int8_segment_{k}_of_3_edgetpu.tflite"
        assert path.read_bytes().endswith(f"segment {k} (test double)".encode())
        sidecar = json.loads(path.with_name(path.name + ".json").read_text())
        assert sidecar["model"] == path.name and sidecar["labels"] == manifest["labels"]
    # A later single-model compile replaces the segments rather than leaving them beside it.
    assert _compile(run_copy, "--compiler", compiler).exit_code == 0
    keys = [k for k in _manifest(run_copy)["artifacts"] if k.startswith("model_int8_edgetpu")]
    assert keys == ["model_int8_edgetpu"] and not list(run_copy.glob("*_segment_*"))


def test_compiler_timing_out_is_killed(run_copy, double, monkeypatch):
    compiler, _ = double
    monkeypatch.setenv("EDGETPU_DOUBLE_MODE", "hang")
    result = _compile(run_copy, "--compiler", compiler, "--timeout", "1")
    assert result.exit_code == 1
    assert "did not finish within 2 s" in result.output
    _assert_nothing_compiled(run_copy)


def test_compiler_that_is_not_executable(run_copy, tmp_path):
    fake = tmp_path / "edgetpu_compiler"
    fake.write_text("not a program")
    result = _compile(run_copy, "--compiler", fake)
    assert result.exit_code == 1 and "is not an executable file" in result.output


def test_changed_int8_model_is_refused(run_copy):
    with open(run_copy / "model_int8.tflite", "ab") as f:
        f.write(b"\0")
    result = _compile(run_copy, "--check-only")
    assert result.exit_code == 1 and "changed after it was recorded" in result.output


@pytest.mark.compiler
def test_real_compiler(run_copy):
    result = _compile(run_copy)
    assert result.exit_code == 0, result.output
    from edge.tflite_file import is_edgetpu_compiled, read_model

    assert is_edgetpu_compiled(read_model(run_copy / "model_int8_edgetpu.tflite"))
    report = json.loads((run_copy / "edgetpu.json").read_text())
    assert report["compiler"]["ops_on_cpu"] == 0


# Smallest sizes each architecture accepts keep this affordable on a 2-core CPU; the ops the
# converter emits do not depend on the input size.
BUILT_IN = {"small_cnn": (16, ()), "mobilenet_v2": (32, (("alpha", 0.35),)), "xception": (71, ())}


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_every_built_in_model_is_predicted_fully_mapped(name, tmp_path):
    """Through the real stages: train (one epoch on a small folder), export --int8, compile --check-only."""
    import models
    from pipeline import export, preflight, train
    from tests.helpers import write_class_folders

    assert set(BUILT_IN) == set(models.MODEL_NAMES), "a new registry model needs a row here"
    size, options = BUILT_IN[name]
    data = write_class_folders(tmp_path / "data", per_class=4)
    run_dir = train.run(train.TrainConfig(data=str(data), model=name, image_size=size, model_options=options,
                                          epochs=1, batch_size=4, heldout_fraction=0.25), tmp_path / "run")
    export.run(export.ExportConfig(mode=export.Mode.INT8, debug_samples=2), run_dir)
    result = _compile(run_dir, "--check-only", "--require-full-mapping")
    assert result.exit_code == 0, result.output
    prediction = preflight.analyze(run_dir / "model_int8.tflite")
    assert prediction.fully_mapped, preflight.table(prediction)
