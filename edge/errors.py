"""Errors of the device side. Each says what was got and what was expected; the CLI prints them without a traceback."""
from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Callable, List, Type


class EdgeError(Exception):
    """Base of every error edge/ raises on purpose (bad model, bad input, missing runtime)."""

    exit_code = 1


class BackendUnavailable(EdgeError):
    """No TFLite interpreter is importable, or the one asked for (--backend) is not installed."""

    # Exit 2: software to install is missing, as with the Edge TPU runtime.
    exit_code = 2


class EdgeTpuUnavailable(EdgeError):
    """The Edge TPU was asked for (or the model needs it) and no Edge TPU runtime or device is there."""

    # Exit 2: the asked-for hardware is missing, as opposed to bad input (1).
    exit_code = 2


class ModelCheckError(EdgeError, ValueError):
    """The .tflite file is damaged, truncated or not a .tflite at all; found before the interpreter sees it."""


class ModelLoadError(EdgeError):
    """The interpreter refused a model that passed the structural check."""


class IntegrityError(EdgeError):
    """The model's sha256 does not match its sidecar or manifest, or no record of it exists."""


class InputError(EdgeError, ValueError):
    """An input (image, array, option) does not fit the model."""


class Terminated(BaseException):
    """SIGTERM, raised where the process is, so a command's clean-up and roll-back run as they do for Ctrl-C."""

    exit_code = 143


def describe_os_error(err: OSError) -> str:
    """An OS error in words: the path and what the errno means (`/run/x: No space left on device (ENOSPC)`)."""
    import errno
    import os

    where = f"{err.filename}: " if err.filename else ""
    if err.errno in errno.errorcode:
        return f"{where}{os.strerror(err.errno)} ({errno.errorcode[err.errno]})"
    return f"{where}{err}"


_STOPPED = ("what this command was writing was rolled back (training keeps its last completed epoch); "
            "run the same command again to continue")


def exits_cleanly(*error_types: Type[Exception]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator for a command: what a user can act on becomes one line on stderr and an exit code, never a
    traceback: an error of `error_types` (its `exit_code`, 1 unless it says otherwise), an OS error while reading
    or writing (1, the path and the reason named), Ctrl-C (130), SIGTERM (143). Both command lines use it: edge's
    with EdgeError, pipeline's with PipelineError and EdgeError."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            import signal

            _stops.clear()  # a command starts unstopped (tests run several in one process)
            previous = {}
            if threading.current_thread() is threading.main_thread():
                previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _raise_terminated)
                if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where Ctrl-C is ignored
                    previous[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_interrupted)
            try:
                try:
                    result = command(*args, **kwargs)
                except error_types as err:
                    _fail(f"error: {err}", getattr(err, "exit_code", 1))
                except OSError as err:
                    _fail(f"error: {describe_os_error(err)}; nothing this command was writing was kept", 1)
                except KeyboardInterrupt:
                    _fail(f"interrupted (Ctrl-C): {_STOPPED}", 130)
                except Terminated:
                    _fail(f"terminated (SIGTERM): {_STOPPED}", Terminated.exit_code)
                if _stops:  # the stop's exception was swallowed on its way; the command then finished its work
                    interrupted = _stops[0] is KeyboardInterrupt
                    _fail(f"{'interrupted (Ctrl-C)' if interrupted else 'terminated (SIGTERM)'} as the command "
                          "finished: what it wrote is complete", 130 if interrupted else Terminated.exit_code)
                return result
            finally:
                # Ended, the command leaves the process as it found it: a stop it recorded, or its handler left
                # behind, would otherwise stop the next training run in the same process (a test worker's).
                for signum, handler in previous.items():
                    if handler is not None:  # None: a handler not set from Python, which cannot be put back
                        signal.signal(signum, handler)
                _stops.clear()

        return wrapper

    return decorate


# The stops whose exception was raised. Python runs a signal's handler wherever the main thread is, a finalizer
# (`__del__`, a weakref callback) included, and there it prints the exception and drops it: the command would go on
# as if never stopped. What is recorded here is raised again by `raise_if_stopped` and reported when the command ends.
_stops: List[Type[BaseException]] = []


def _raise_terminated(signum: int, frame: Any) -> None:
    _stops.append(Terminated)
    raise Terminated()


def _raise_interrupted(signum: int, frame: Any) -> None:
    _stops.append(KeyboardInterrupt)
    raise KeyboardInterrupt()


def raise_if_stopped() -> None:
    """Raise Ctrl-C's or SIGTERM's exception again if one was raised before: a long loop calls this at its steps,
    so a stop a finalizer swallowed still ends it at the next step."""
    if _stops:
        raise _stops[0]()


def _fail(message: str, code: int) -> None:
    import click  # only on the way out: the library itself does not need click

    click.echo(message, err=True)
    sys.exit(code)
