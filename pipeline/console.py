"""What a person sees on the terminal: our lines, not TensorFlow's start-up logs.

    pipeline run                 quiet: TensorFlow's C++ logs and other packages' Python warnings hidden
    TF_CPP_MIN_LOG_LEVEL=2 pipeline run   the same (2 or 3 asks for quiet: never noisier than the default)
    pipeline --verbose run       everything TensorFlow and its libraries print
    TF_CPP_MIN_LOG_LEVEL=0 pipeline run   the user's own lower level (0 or 1): nothing is hidden by us

Measured with TensorFlow 2.21 (tensorflow-cpu, x86-64): `import tensorflow` prints, from C++, absl's
"All log messages before absl::InitializeLog() is called are written to STDERR", oneDNN's and
cudart's INFO lines and the CPU-feature notice, twice (two libraries), whatever TF_CPP_MIN_LOG_LEVEL
says: they are written before TensorFlow reads it. Only level 3 hides the "failed call to cuInit"
ERROR at the first op. The TFLite converter prints "fully_quantize: ..." and the interpreters
"INFO: Created TensorFlow Lite XNNPACK delegate for CPU." with no level at all. So, when quiet:
TF_CPP_MIN_LOG_LEVEL=3 before TensorFlow loads, file descriptor 2 pointed at a temporary file while
it is imported and while a converter or interpreter starts (`native_quiet`; what was caught is
printed after all when the block fails), and Python warnings and log records from other packages
at ERROR only.

TensorFlow is imported by the stage that uses it, not by the command line: a command that refuses its run
folder, manifest, options or files answers before TensorFlow would have loaded (seconds of CPU). Wherever that
first import happens, `configure` has arranged for it to be quiet (`_QuietTensorFlow`).
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import sys
import tempfile
import warnings
from typing import Iterator

_quiet = False
# Our packages: their warnings are always shown.
_OURS = r"(pipeline|edge|models)(\..*)?$"


# TF_CPP_MIN_LOG_LEVEL values that ask to see more than the quiet default (INFO, WARNING): TensorFlow's own rules.
# Any other value (2, 3, ...) asks for quiet; taken alone by TensorFlow it would still let through what its
# libraries print before reading it, so it gets the default's quiet.
_LOUDER_LEVELS = ("0", "1")


def configure(verbose: bool) -> bool:
    """Decide, before TensorFlow is imported, how much of it to show; returns True when quiet.

    Quiet unless --verbose or the user set TF_CPP_MIN_LOG_LEVEL to 0 or 1 (then TensorFlow's own level rules).
    """
    global _quiet
    _quiet = not verbose and os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() not in _LOUDER_LEVELS
    if not _quiet:
        return False
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", module=_OURS)
    for name in ("tensorflow", "absl", "h5py", "matplotlib"):
        logging.getLogger(name).setLevel(logging.ERROR)
    _quiet_tensorflow_import()
    return True


class _QuietTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The first `import tensorflow`, by whichever module makes it: run under `native_quiet`, then TensorFlow's
    and absl's Python loggers set to ERROR. Finds nothing else, and leaves `sys.meta_path` once used."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)  # the real finders
        if spec is None:
            return None
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self._loader  # TensorFlow's own loader from here on
        with native_quiet():
            self._loader.exec_module(module)
        # TensorFlow's Python logger adds its own handler at import; records below ERROR stay unshown.
        module.get_logger().setLevel(logging.ERROR)
        try:  # absl's Python logging, which TensorFlow and tf-keras also write to
            from absl import logging as absl_logging

            absl_logging.set_verbosity(absl_logging.ERROR)
        except ImportError:
            pass


def _quiet_tensorflow_import() -> None:
    """Make TensorFlow's coming first import quiet (nothing to do once it is imported, or when already arranged)."""
    if "tensorflow" not in sys.modules and not any(isinstance(f, _QuietTensorFlow) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlow())


@contextlib.contextmanager
def native_quiet() -> Iterator[None]:
    """When quiet, send what C++ code writes to file descriptor 2 to a temporary file for the block.

    If the block raises, what was caught is written to stderr first: a failure keeps its context.
    Python's own writes to sys.stderr go the same way, so keep the block to the native call.
    """
    if not _quiet:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        except BaseException:
            _restore(saved)
            caught.seek(0)
            text = caught.read().decode("utf-8", "replace")
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()
            raise
        else:
            _restore(saved)


def _restore(saved: int) -> None:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
