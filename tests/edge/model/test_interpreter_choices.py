"""edge.model.interpreter says why it skipped a backend, passes --threads on every Edge TPU route, and tells a
device that cannot be opened from a model that cannot be loaded."""
from __future__ import annotations

import importlib
import logging
from types import SimpleNamespace

import pytest

from edge.model import interpreter as interp
from edge.errors import BackendUnavailable, EdgeTpuUnavailable, ModelLoadError
from tests.support.edge_paths import EDGETPU, INT8


FAKE_TFLITE_RUNTIME = {
    "tflite_runtime/__init__.py": "",
    "tflite_runtime/interpreter.py": (
        "CALLS = []\n"
        "class Interpreter:\n"
        "    def __init__(self, **kwargs):\n"
        "        CALLS.append(kwargs)\n"
        "    def allocate_tensors(self):\n"
        "        pass\n"
        "def load_delegate(library, options=None):\n"
        "    return ('delegate', library, options)\n"
    ),
}


def test_tflite_runtime_skipped_under_numpy2_is_named_when_nothing_else_is_there(fake_packages, monkeypatch):
    fake_packages(FAKE_TFLITE_RUNTIME)
    monkeypatch.setattr(interp, "_numpy_major", lambda: 2)
    with pytest.raises(BackendUnavailable, match=r"tflite_runtime is installed but skipped: tflite-runtime 2.14 fails with numpy 2.*numpy<2"):
        interp.load_backend(("tflite_runtime",))


def test_tflite_runtime_skipped_under_numpy2_is_noted_when_another_backend_runs(fake_packages, monkeypatch, caplog):
    pytest.importorskip("ai_edge_litert")
    fake_packages(FAKE_TFLITE_RUNTIME)
    monkeypatch.setattr(interp, "_numpy_major", lambda: 2)
    with caplog.at_level(logging.WARNING, logger="edge.model.interpreter"):
        loaded = interp.open_model(INT8)
    assert loaded.backend == "ai_edge_litert"
    assert len(loaded.notes) == 1 and "tflite_runtime is installed but skipped" in loaded.notes[0]
    assert "tflite_runtime is installed but skipped" in caplog.text and "using ai_edge_litert" in caplog.text


GOOGLE_PYCORAL = {
    "pycoral/__init__.py": "",
    "pycoral/utils/__init__.py": "",
    "pycoral/utils/edgetpu.py": (
        "def load_edgetpu_delegate(options=None):\n"
        "    return ('edgetpu delegate', options)\n"
        "def make_interpreter(model_path_or_content, device=None, delegate=None):\n"
        "    raise AssertionError('takes no thread count: not to be used when --threads is given')\n"
    ),
}


def test_pycoral_route_passes_threads(fake_packages):
    fake_packages({**FAKE_TFLITE_RUNTIME, **GOOGLE_PYCORAL})
    loaded = interp.open_model(EDGETPU, device="usb", threads=3)
    calls = importlib.import_module("tflite_runtime.interpreter").CALLS
    assert loaded.edgetpu and loaded.backend == "tflite_runtime"
    assert len(calls) == 1 and calls[0]["num_threads"] == 3
    assert calls[0]["experimental_delegates"] == [("edgetpu delegate", {"device": "usb"})]
    assert calls[0]["model_content"] == EDGETPU.read_bytes()


class _FailingInterpreter:
    def __init__(self, **kwargs):
        pass

    def allocate_tensors(self):
        raise RuntimeError("Failed to prepare for TPU. Package requires runtime version (14), which is newer than this runtime version (13).")


def test_a_model_that_fails_on_an_opened_edge_tpu_is_the_models_fault(monkeypatch):
    backend = interp.Backend("tflite_runtime", SimpleNamespace(Interpreter=_FailingInterpreter, load_delegate=None))
    monkeypatch.setattr(interp, "load_backend", lambda: backend)
    monkeypatch.setattr(interp, "_google_pycoral_edgetpu", lambda: None)
    monkeypatch.setattr(interp, "_edgetpu_delegate", lambda backend, device: "delegate")
    with pytest.raises(ModelLoadError, match="the Edge TPU runtime is there, but .* failed to load on it: Failed to prepare") as err:
        interp.open_model(EDGETPU)
    assert "no Edge TPU could be opened" not in str(err.value)


def test_a_delegate_that_cannot_load_is_the_devices_fault(monkeypatch):
    def no_device(library, options=None):
        raise ValueError("Failed to load delegate from libedgetpu.so.1")

    backend = interp.Backend("tflite_runtime", SimpleNamespace(Interpreter=_FailingInterpreter, load_delegate=no_device))
    monkeypatch.setattr(interp, "load_backend", lambda: backend)
    monkeypatch.setattr(interp, "_google_pycoral_edgetpu", lambda: None)
    monkeypatch.setattr("ctypes.CDLL", lambda name: object())  # the library is "there"; the device is not
    with pytest.raises(EdgeTpuUnavailable, match="cannot load the Edge TPU delegate .*Failed to load delegate"):
        interp.open_model(EDGETPU)
