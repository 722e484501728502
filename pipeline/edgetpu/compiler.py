"""Running Google's edgetpu_compiler: finding it, its arguments, and one call with a timeout that ends its children.

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
    """Run the compiler; its exit code and its words both count. Returns stdout + stderr."""
    try:
        process = subprocess.Popen([compiler, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)  # its own group, so a timeout kills its children too
    except OSError as err:
        raise PipelineError(f"cannot start {compiler}: {err}") from err
    # The compiler's own -t timer covers compilation only; allow it a margin before killing it.
    limit = timeout + min(30, timeout)
    try:
        console, _ = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise PipelineError(f"edgetpu_compiler did not finish within {limit} s (--timeout {timeout} plus a margin); "
                            "nothing was written. Raise --timeout for large models.")
    if process.returncode != 0:
        parsed = compiler_log.parse(console)
        raise PipelineError(f"edgetpu_compiler exited with code {process.returncode}: {parsed.fatal or 'no reason printed'}. "
                            "Last output:\n" + "\n".join(console.strip().splitlines()[-8:]))
    return console
