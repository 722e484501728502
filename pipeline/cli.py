"""Command line of the host side: `pipeline train | export | compile | parity | run`.

Thin by design: each command parses options, builds its stage's config and calls the stage.

    pipeline run --out runs/digits
"""
from __future__ import annotations

import functools
import sys

import click

from pipeline.errors import PipelineError


def reports_errors(command):
    """Turn a PipelineError into its message on stderr and its exit code (no traceback)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except PipelineError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(err.exit_code)

    return wrapper


@click.group()
def main():
    """Train, quantize, compile for the Edge TPU, and check accuracy parity."""


# Each stage's command follows, in pipeline order. Keep them thin: options -> config -> stage.run.
