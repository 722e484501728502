"""Which interpreter runs a model: Edge TPU models go to the delegate-capable one, CPU models to the
fastest installed, `--backend NAME` forces one and refuses an absent one (exit 2, install hint)."""
from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from edge.model import interpreter as interp
from edge.errors import BackendUnavailable, InputError
from tests.support.edge_paths import EDGETPU, IMAGES, INT8, run_edge
from tests.edge.model.test_interpreter_choices import FAKE_TFLITE_RUNTIME


_run = run_edge


def test_edge_tpu_model_goes_to_tflite_runtime_and_cpu_model_to_ai_edge_litert(fake_packages, monkeypatch):
    pytest.importorskip("ai_edge_litert")
    fake_packages(FAKE_TFLITE_RUNTIME)
    monkeypatch.setattr(interp, "_numpy_major", lambda: 1)
    monkeypatch.setattr(interp, "_google_pycoral_edgetpu", lambda: None)
    monkeypatch.setattr("ctypes.CDLL", lambda name: object())  # libedgetpu "is there": the fake delegate loads
    tpu = interp.open_model(EDGETPU)
    assert tpu.edgetpu and tpu.backend == "tflite_runtime" and "loads its delegate" in tpu.why
    calls = importlib.import_module("tflite_runtime.interpreter").CALLS
    assert calls[-1]["experimental_delegates"] == [("delegate", "libedgetpu.so.1", {})]
    cpu = interp.open_model(INT8)
    assert cpu.backend == "ai_edge_litert" and not cpu.edgetpu
    assert cpu.why == "the faster CPU interpreter of those installed; tflite_runtime kept for the Edge TPU delegate"
    assert len(calls) == 1  # the CPU model never touched tflite_runtime


def test_forced_backend_is_used_even_when_another_is_first(fake_packages, monkeypatch):
    pytest.importorskip("ai_edge_litert")
    fake_packages(FAKE_TFLITE_RUNTIME)
    monkeypatch.setattr(interp, "_numpy_major", lambda: 1)
    loaded = interp.open_model(INT8, backend="tflite_runtime")
    assert loaded.backend == "tflite_runtime" and loaded.why == "asked for with --backend"
    assert importlib.import_module("tflite_runtime.interpreter").CALLS[-1]["model_content"] == INT8.read_bytes()


def test_an_absent_backend_is_refused_not_replaced(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tflite_runtime" else real(name, *a))
    with pytest.raises(BackendUnavailable, match=r"--backend tflite_runtime asked for, but tflite_runtime is not installed; "
                                                 r"install it: `pip install tflite-runtime"):
        interp.open_model(INT8, backend="tflite_runtime")
    with pytest.raises(InputError, match=r"--backend 'tflite', expected one of ai_edge_litert, tflite_runtime, tensorflow.lite"):
        interp.open_model(INT8, backend="tflite")


def test_cli_backend_absent_exits_2_with_the_install_hint(tmp_path: Path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ai_edge_litert" else real(name, *a))
    model = tmp_path / "m.tflite"
    shutil.copy(INT8, model)
    for args in (("classify", model, IMAGES / "red.png"), ("bench", model, "--runs", "1")):
        result = _run(*args, "--backend", "ai_edge_litert")
        assert result.exit_code == 2, result.output
        assert "error: --backend ai_edge_litert asked for, but ai_edge_litert is not installed" in result.stderr
        assert "pip install ai-edge-litert" in result.stderr and "Traceback" not in result.stderr


def test_cli_names_the_interpreter_and_why(int8_copy: Path):
    result = _run("classify", int8_copy, IMAGES / "red.png")
    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stderr.splitlines() if x.startswith("interpreter: "))
    assert line.split()[1] in interp.CPU_ORDER and "(" in line
