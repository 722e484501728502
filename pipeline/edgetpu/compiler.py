"""Running Google's edgetpu_compiler: finding it, its arguments, and one call that ends it and its children however
the call ends (output read, timeout, error, Ctrl-C, SIGTERM).

The compiler is x86-64 Linux only (Coral's apt repository); where it is absent the stage says how to get it
and points at the pre-flight, which needs no compiler.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import List

from pipeline.edgetpu import compiler_log
from pipeline.errors import ConfigError, HardwareUnavailable, PipelineError
from pipeline.rundir.files import signals_held

DEFAULT_TIMEOUT = 180  # seconds for one compile
INSTALL_HINT = (
    "edgetpu_compiler runs only on x86-64 Linux: on Debian/Ubuntu add Coral's apt repository "
    "('coral-edgetpu-stable', as Coral's compiler documentation gives it) and `apt-get install edgetpu-compiler`, "
    "or run it in an x86-64 Linux container; then pass --compiler PATH or put it on PATH. "
    "`pipeline compile RUN --check-only` works without it."
)


def find(config, headline: str) -> str:
    """The compiler's path: --compiler (checked), else the one on PATH; HardwareUnavailable naming how to get it."""
    if config.compiler:
        path = Path(config.compiler)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(f"--compiler {config.compiler} is not an executable file")
        return str(path)
    found = shutil.which("edgetpu_compiler")
    if not found:
        raise HardwareUnavailable(f"edgetpu_compiler not found on PATH. {headline}. {INSTALL_HINT}")
    return found


def arguments(config, out_dir: Path, model: Path) -> List[str]:
    """The compiler's arguments for `config` (a CompileConfig), writing into out_dir."""
    args = ["-s", "-o", str(out_dir), "-t", str(config.seconds)]
    if config.num_segments:
        args += ["-n", str(config.num_segments)]
    if config.min_runtime_version:
        args += ["-m", str(config.min_runtime_version)]
    if config.intermediate_tensors:
        args += ["-i", config.intermediate_tensors]
    if config.search_delegate:
        args += ["-d"]
        if config.delegate_search_step:
            args += ["-k", str(config.delegate_search_step)]
    return args + [str(model)]


def call(compiler: str, args: List[str], timeout: int) -> str:
    """Run the compiler; its exit code and its words both count. Returns stdout + stderr.

    The compiler runs in a session of its own (so a timeout can end it with the child it forks), which also keeps
    the terminal's Ctrl-C from reaching it: its whole process group is ended here on every way out, a signal or
    an error included, so nothing keeps writing into a folder this command is about to remove.
    """
    process = None
    try:
        with signals_held():  # started and known as one step: the finally below always has the process to end
            try:
                process = subprocess.Popen([compiler, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True, start_new_session=True)
            except OSError as err:
                raise PipelineError(f"cannot start {compiler}: {err}") from err
        # The compiler's own -t timer covers compilation only; allow it a margin before killing it.
        limit = timeout + min(30, timeout)
        try:
            console, _ = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            raise PipelineError(f"edgetpu_compiler did not finish within {limit} s (--timeout {timeout} plus a "
                                "margin); nothing was written. Raise --timeout for large models.") from None
    finally:
        if process is not None:
            end_group(process)
    if process.returncode != 0:
        parsed = compiler_log.parse(console)
        raise PipelineError(f"edgetpu_compiler exited with code {process.returncode}: {parsed.fatal or 'no reason printed'}. "
                            "Last output:\n" + "\n".join(console.strip().splitlines()[-8:]))
    return console


def end_group(process: subprocess.Popen) -> None:
    """Kill every process left in `process`'s group (the compiler's own session) and reap `process`.

    Also after a normal end: a child the compiler forked may still hold the group. The group's id is the
    compiler's pid, which Linux does not hand out again while any process of the group lives."""
    with signals_held():  # a second Ctrl-C waits until the group is ended and the compiler reaped
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the group is empty: everything in it has exited
        except PermissionError:
            pass  # a member changed its user id (not something the compiler does); nothing more can be ended
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
