"""Errors of the device side. Each says what was got and what was expected; the CLI prints them without a traceback."""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Type


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


def exits_cleanly(*error_types: Type[Exception]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator for a command: an error of `error_types` becomes "error: <message>" on stderr and the
    process exits with the error's `exit_code` (1 unless it says otherwise): no traceback for bad input.
    Both command lines use it: edge's with EdgeError, pipeline's with PipelineError and EdgeError."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return command(*args, **kwargs)
            except error_types as err:
                import click  # only on the way out: the library itself does not need click

                click.echo(f"error: {err}", err=True)
                sys.exit(getattr(err, "exit_code", 1))

        return wrapper

    return decorate
