"""Find a TFLite interpreter and make one for a model, on the CPU or the Coral Edge TPU.

    from edge.model.interpreter import make_interpreter
    interpreter = make_interpreter("model_int8_edgetpu.tflite")   # Edge TPU when the model is compiled for it

Which interpreter module runs a model depends on what the model needs (choose_backend):
  compiled for the Edge TPU  the first installed of BACKEND_ORDER: `tflite_runtime` (what pycoral
                             and libedgetpu are built for), `ai_edge_litert`, `tensorflow.lite`;
  any other model            the first installed of CPU_ORDER: `ai_edge_litert` first, because it
                             runs int8 models about 20 times faster than tflite-runtime 2.14 on
                             x86-64 (bench/results/edge_speed.md); the order is fixed, not timed at
                             every start (slow and noisy);
  backend="NAME"             that one, or BackendUnavailable with the install command: never a fallback.
TensorFlow is imported only when nothing else is there. Every model is read once, checked structurally
(edge.model.check) and handed to the interpreter as those same bytes, so a damaged file gives
an error instead of a crashed process. Over 300 lines because it is one job: every way an interpreter
can be missing or fail (module, numpy, delegate, model) said in words, in one place.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence, Tuple, Union

from edge.errors import BackendUnavailable, EdgeTpuUnavailable, InputError, ModelLoadError

# Edge TPU models: the delegate-capable interpreter first (libedgetpu and pycoral are built for tflite_runtime).
BACKEND_ORDER = ("tflite_runtime", "ai_edge_litert", "tensorflow.lite")
# CPU models: the fastest first, as measured in bench/edge/speed.py (int8 MobileNetV2 224, 1 thread).
CPU_ORDER = ("ai_edge_litert", "tflite_runtime", "tensorflow.lite")
INSTALL_HINTS = {
    "tflite_runtime": "`pip install tflite-runtime 'numpy<2'` (Python 3.9 to 3.11), or Coral's python3-tflite-runtime",
    "ai_edge_litert": "`pip install ai-edge-litert` (or this package's `edge` extra: `pip install 'edgeflow[edge]'`)",
    "tensorflow.lite": "`pip install tensorflow` (a host convenience, not for boards)",
}
EDGETPU_LIBRARY = "libedgetpu.so.1"

EDGETPU_INSTALL = (
    "install the Edge TPU runtime (libedgetpu1-std from Coral's apt repository: "
    "https://coral.ai/docs/accelerator/get-started/) and, optionally, Google's pycoral "
    "(`python3 -m pip install --extra-index-url https://google-coral.github.io/py-repo/ pycoral`; "
    "the `pycoral` on PyPI is an unrelated package)"
)


class Backend(NamedTuple):
    name: str  # one of BACKEND_ORDER
    module: Any  # the module holding Interpreter and load_delegate
    skipped: Tuple[str, ...] = ()  # why installed backends in the order could not be used
    why: str = ""  # why this one was chosen, for the user


class LoadedModel(NamedTuple):
    interpreter: Any  # an allocated Interpreter of `backend`
    path: Optional[Path]  # where the model came from (None for bytes)
    info: Any  # edge.model.tflite_file.ModelInfo of the checked bytes
    backend: str  # which interpreter module runs it
    edgetpu: bool  # True when the Edge TPU delegate is attached
    notes: Tuple[str, ...] = ()  # what the user should know (an installed backend that was skipped, and why)
    why: str = ""  # why this interpreter runs it ("the faster CPU interpreter of those installed", ...)


_backend_cache: Optional[Backend] = None
# Library code does not print; a warning on this logger reaches stderr through logging's last-resort handler.
_log = logging.getLogger("edge.model.interpreter")


def _numpy_major() -> int:
    import numpy

    return int(numpy.__version__.split(".")[0])


class _Skipped(NamedTuple):
    reason: str  # why an installed backend cannot be used here


def _probe_backend(name: str) -> Union[bool, _Skipped]:
    """True when `name` is installed and can work here, False when absent, _Skipped with the reason.
    Nothing is imported: probing every backend in an order costs no start-up time."""
    if name not in INSTALL_HINTS:
        raise ValueError(f"unknown backend {name!r}, expected one of {CPU_ORDER}")
    if importlib.util.find_spec(name.split(".")[0]) is None:
        return False
    # tflite-runtime 2.14 fails on numpy 2 at model load (a SystemError from CreateWrapperFromFile); skipping it lets a host
    # with numpy 2 use ai_edge_litert, and the reason is kept so the user is told.
    if name == "tflite_runtime" and _numpy_major() >= 2:
        import numpy

        return _Skipped(
            f"tflite_runtime is installed but skipped: tflite-runtime 2.14 fails with numpy 2 and this is numpy "
            f"{numpy.__version__}; to use it, `pip install 'numpy<2'`"
        )
    return True


def _import_backend(name: str) -> Any:
    """The module holding Interpreter and load_delegate; TensorFlow only here, never at import time."""
    if name == "tensorflow.lite":
        return importlib.import_module("tensorflow").lite
    return importlib.import_module(f"{name}.interpreter")


def load_backend(order: Sequence[str] = BACKEND_ORDER) -> Backend:
    """The first usable interpreter module in `order` (cached for the default order).

    Every installed backend in `order` that cannot work here is named in `Backend.skipped` (and
    logged once as a warning); when nothing usable is left the reasons are in the error.
    """
    global _backend_cache
    if tuple(order) == BACKEND_ORDER and _backend_cache is not None:
        return _backend_cache
    probes = [(name, _probe_backend(name)) for name in order]
    skipped = tuple(p.reason for _, p in probes if isinstance(p, _Skipped))
    chosen = next((name for name, p in probes if p is True), None)
    if chosen is None:
        hint = INSTALL_HINTS[order[0]] if len(order) == 1 else "`pip install ai-edge-litert`, or `pip install tflite-runtime 'numpy<2'` on a board"
        raise BackendUnavailable(
            f"no TFLite interpreter found (tried {', '.join(order)})" + "".join(f"; {reason}" for reason in skipped) + f"; install one: {hint}"
        )
    backend = Backend(chosen, _import_backend(chosen), skipped)
    for reason in skipped:
        _log.warning("note: %s; using %s", reason, chosen)
    if tuple(order) == BACKEND_ORDER:
        _backend_cache = backend
    return backend


def choose_backend(compiled: bool, forced: Optional[str] = None) -> Backend:
    """The interpreter module for a model: `forced` when given (refused when absent), else by what the
    model needs: the Edge TPU delegate (BACKEND_ORDER) or CPU speed (CPU_ORDER). `why` says which rule chose it."""
    if forced is not None:
        if forced not in INSTALL_HINTS:
            raise InputError(f"--backend {forced!r}, expected one of {', '.join(CPU_ORDER)}")
        probe = _probe_backend(forced)
        if probe is not True:
            reason = probe.reason if isinstance(probe, _Skipped) else f"{forced} is not installed"
            raise BackendUnavailable(f"--backend {forced} asked for, but {reason}; install it: {INSTALL_HINTS[forced]}")
        return Backend(forced, _import_backend(forced), (), "asked for with --backend")
    if compiled:
        backend = load_backend()
        return backend._replace(why="the model is compiled for the Edge TPU, and " + (
            "this interpreter loads its delegate" if backend.name == "tflite_runtime" else
            "tflite_runtime (what libedgetpu is built for) is not installed"))
    backend = load_backend(CPU_ORDER)
    if backend.name != CPU_ORDER[0]:
        why = f"{CPU_ORDER[0]}, the faster CPU interpreter, is not installed ({INSTALL_HINTS[CPU_ORDER[0]]})"
    elif any(_probe_backend(name) is True for name in CPU_ORDER[1:]):
        why = "the faster CPU interpreter of those installed"
    else:
        why = "the only interpreter installed"
    if backend.name != "tflite_runtime" and _probe_backend("tflite_runtime") is True:
        why += "; tflite_runtime kept for the Edge TPU delegate"
    return backend._replace(why=why)


def _google_pycoral_edgetpu() -> Optional[Any]:
    """Google's `pycoral.utils.edgetpu`, or None (absent, or PyPI's unrelated `pycoral`)."""
    try:
        if importlib.util.find_spec("pycoral") is None or importlib.util.find_spec("pycoral.utils") is None:
            return None
        if importlib.util.find_spec("pycoral.utils.edgetpu") is None:
            return None
        return importlib.import_module("pycoral.utils.edgetpu")
    except Exception:  # noqa: BLE001 - an unrelated `pycoral` may fail to import in any way; it is not ours to use
        return None


def _edgetpu_delegate(backend: Backend, device: Optional[str]) -> Any:
    import ctypes

    # Probe the library first: a failed load_delegate leaves a half-built Delegate whose __del__
    # prints a traceback on stderr, which a user would take for a crash.
    try:
        ctypes.CDLL(EDGETPU_LIBRARY)
    except OSError as err:
        raise EdgeTpuUnavailable(f"the Edge TPU runtime {EDGETPU_LIBRARY} is not installed ({err}); {EDGETPU_INSTALL}") from err
    options = {"device": device} if device else {}
    try:
        return backend.module.load_delegate(EDGETPU_LIBRARY, options)
    except (ValueError, OSError, RuntimeError) as err:
        raise EdgeTpuUnavailable(f"cannot load the Edge TPU delegate {EDGETPU_LIBRARY} ({err}); {EDGETPU_INSTALL}") from err


def _batch_size(info: Any) -> int:
    shape = info.tensor(info.inputs[0]).shape if info.inputs else ()
    return int(shape[0]) if shape else 1


def open_model(
    model: Union[str, Path, bytes],
    edgetpu: Optional[bool] = None,
    device: Optional[str] = None,
    threads: Optional[int] = None,
    data: Optional[bytes] = None,
    backend: Optional[str] = None,
) -> LoadedModel:
    """Check `model` and make an allocated interpreter for it; see make_interpreter.

    `data` are the model's bytes when the caller already read them (e.g. to check the sha256),
    so that exactly the checked bytes are loaded.
    """
    from edge.files.bounded import MAX_MODEL_BYTES, read_regular
    from edge.model.check import check_model
    from edge.model.tflite_file import is_edgetpu_compiled

    path: Optional[Path] = None
    if isinstance(model, (bytes, bytearray)):
        data = bytes(model)
    else:
        path = Path(model)
        if data is None:
            try:
                data = read_regular(path, MAX_MODEL_BYTES, "model", InputError)  # a FIFO or a huge file refused unread
            except OSError as err:
                raise InputError(f"cannot read model {path}: {err.strerror or err}; expected a .tflite file") from err
    name = str(path) if path else "model"
    info = check_model(data, name=name)
    compiled = is_edgetpu_compiled(info)
    if edgetpu is False and compiled:
        raise InputError(
            f"{name} is compiled for the Edge TPU (it contains edgetpu-custom-op) and cannot run on the CPU; "
            "use the uncompiled int8 model, or allow the Edge TPU"
        )
    if edgetpu is True and not compiled:
        raise InputError(
            f"{name} is not compiled for the Edge TPU (no edgetpu-custom-op); "
            "compile it first (`pipeline compile RUN`, or edgetpu_compiler), or run it without --edgetpu"
        )
    use_tpu = compiled
    if use_tpu and _batch_size(info) != 1:
        raise InputError(f"{name} has batch size {_batch_size(info)}, expected 1: the Edge TPU runs batch 1 only; re-export with batch 1")

    chosen = choose_backend(use_tpu, backend)
    notes = chosen.skipped
    if use_tpu:
        interpreter, via = _edgetpu_interpreter(chosen, data, name, edgetpu, device, threads, backend in (None, "tflite_runtime"))
        return LoadedModel(interpreter, path, info, via, True, notes, chosen.why)

    try:
        interpreter = chosen.module.Interpreter(model_content=data, num_threads=threads)
        interpreter.allocate_tensors()
    except (ValueError, RuntimeError, SystemError) as err:
        raise ModelLoadError(f"{chosen.name} cannot load {name}: {str(err).strip()}") from err
    return LoadedModel(interpreter, path, info, chosen.name, False, notes, chosen.why)


def _edgetpu_interpreter(backend: Backend, data: bytes, name: str, edgetpu: Optional[bool], device: Optional[str],
                         threads: Optional[int], use_pycoral: bool = True) -> Tuple[Any, str]:
    """(allocated interpreter with the Edge TPU delegate, backend name). Two steps, two errors: opening the
    Edge TPU (EdgeTpuUnavailable) and loading the model on it (ModelLoadError: the model, not the device)."""
    reason = "it is compiled for the Edge TPU" if edgetpu is None else "--edgetpu / edgetpu=True asks for it"
    # pycoral runs tflite_runtime's Interpreter: not when --backend asked for another one.
    pycoral = _google_pycoral_edgetpu() if use_pycoral else None
    if pycoral is None and not hasattr(backend.module, "load_delegate"):
        raise EdgeTpuUnavailable(f"{name} needs the Edge TPU but {backend.name} cannot load delegates; {EDGETPU_INSTALL}")
    if pycoral is not None and not hasattr(pycoral, "load_edgetpu_delegate") and threads is not None:
        raise InputError(f"this pycoral's make_interpreter cannot set a thread count; run {name} without --threads")
    interpreter = None
    try:
        if pycoral is None:
            delegate, interpreter_class, via = _edgetpu_delegate(backend, device), backend.module.Interpreter, backend.name
        elif hasattr(pycoral, "load_edgetpu_delegate"):
            # pycoral's make_interpreter takes no thread count; its delegate with tflite_runtime's
            # Interpreter (which pycoral itself uses) is the same interpreter with num_threads.
            delegate = pycoral.load_edgetpu_delegate({"device": device} if device else {})
            interpreter_class, via = importlib.import_module("tflite_runtime.interpreter").Interpreter, "tflite_runtime"
        else:
            interpreter, via = pycoral.make_interpreter(data, device=device), "tflite_runtime"  # loads the delegate
    except EdgeTpuUnavailable as err:
        raise EdgeTpuUnavailable(f"{name} needs the Edge TPU ({reason}), but {err}") from err
    except (ValueError, RuntimeError, OSError, ImportError) as err:
        raise EdgeTpuUnavailable(f"{name} is compiled for the Edge TPU but no Edge TPU could be opened ({err}); {EDGETPU_INSTALL}") from err
    try:
        if interpreter is None:
            interpreter = interpreter_class(model_content=data, experimental_delegates=[delegate], num_threads=threads)
        interpreter.allocate_tensors()
    except (ValueError, RuntimeError, SystemError) as err:
        raise ModelLoadError(
            f"the Edge TPU runtime is there, but {name} failed to load on it: {str(err).strip()}; the model is at fault "
            "(compiled for a newer Edge TPU runtime than this one, or not a model edgetpu_compiler wrote), not the device"
        ) from err
    return interpreter, via


def make_interpreter(
    model: Union[str, Path, bytes],
    edgetpu: Optional[bool] = None,
    device: Optional[str] = None,
    threads: Optional[int] = None,
    backend: Optional[str] = None,
) -> Any:
    """An allocated interpreter for `model`.

    edgetpu=None: on the Edge TPU when the model is compiled for it, else on the CPU.
    edgetpu=True: the model must be compiled for the Edge TPU and an Edge TPU must be present.
    edgetpu=False: CPU only; a compiled model is refused.
    device: which Edge TPU (':0', 'usb', 'pci:0'), as libedgetpu names them.
    backend: force an interpreter module ('ai_edge_litert', 'tflite_runtime', 'tensorflow.lite').
    Raises EdgeTpuUnavailable (no runtime/device), BackendUnavailable, ModelCheckError (damaged file), InputError.
    """
    return open_model(model, edgetpu=edgetpu, device=device, threads=threads, backend=backend).interpreter


def backend_name(compiled: bool = False) -> str:
    """Name of the interpreter module a CPU model (or, compiled=True, an Edge TPU model) would run on."""
    return choose_backend(compiled).name

