"""`pipeline compile`: Edge TPU pre-flight, then Google's edgetpu_compiler.

    pipeline compile runs/digits --check-only     prediction only; works on any machine
    pipeline compile runs/digits                  needs edgetpu_compiler (x86-64 Linux)

Writes RUN/edgetpu.json (the pre-flight, the compiler's parsed log, and where the two disagree)
and, when the compiler succeeds, RUN/model_int8_edgetpu.tflite with a sidecar for the device.
A failed or timed-out compile leaves the run as it was. Each compiled model records the sha256
of the int8 model it came from (`compiled_from`), so a stale one is refused where it would ship.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, NamedTuple, Optional

from edge.integrity import write_sidecar
from pipeline import compiler_log, preflight
from pipeline import manifest as manifest_mod
from pipeline.errors import ConfigError, HardwareUnavailable, PipelineError
from pipeline.files import write_json_atomic

INSTALL_HINT = (
    "edgetpu_compiler runs only on x86-64 Linux: on Debian/Ubuntu add Coral's apt repository "
    "('coral-edgetpu-stable', as Coral's compiler documentation gives it) and `apt-get install edgetpu-compiler`, "
    "or run it in an x86-64 Linux container; then pass --compiler PATH or put it on PATH. "
    "`pipeline compile RUN --check-only` works without it."
)


@dataclass(frozen=True)
class CompileConfig:
    check_only: bool = False  # pre-flight only: no compiler needed
    require_full_mapping: bool = False  # fail when any op is predicted (or compiled) to run on the CPU
    compiler: Optional[str] = None  # path to edgetpu_compiler; None = look it up on PATH
    timeout: int = 180  # seconds; passed as -t and enforced on the process
    num_segments: Optional[int] = None  # -n: split for pipelining across several Edge TPUs
    min_runtime_version: Optional[int] = None  # -m: oldest Edge TPU runtime the model must run on
    intermediate_tensors: Optional[str] = None  # -i: comma-separated tensor names to output from the TPU op
    search_delegate: bool = False  # -d: on failure, retry with the stopping point moved earlier
    delegate_search_step: Optional[int] = None  # -k: step in ops for -d


class CompileResult(NamedTuple):
    preflight: preflight.Preflight
    report_path: Path  # RUN/edgetpu.json
    models: List[Path]  # compiled models written into RUN (empty with --check-only)
    compiler: Optional[compiler_log.CompilerOutput]


def run(config: CompileConfig, run_dir: Path, say=print) -> CompileResult:
    """Pre-flight always; the compiler unless check_only. Returns what was written."""
    run_dir = Path(run_dir)
    manifest = manifest_mod.load(run_dir)
    model = manifest_mod.artifact_path(manifest, run_dir, "model_int8")
    prediction = preflight.analyze(model, runtime=config.min_runtime_version or preflight.rules.DEFAULT_RUNTIME)
    say(preflight.table(prediction))
    report = {"schema_version": 1, "model": manifest["artifacts"]["model_int8"]["path"],
              "model_sha256": manifest["artifacts"]["model_int8"]["sha256"], "preflight": prediction.as_dict(),
              "compiler": None, "disagreements": []}
    if config.check_only:
        path = _record_report(run_dir, report)
        _require_full_mapping(config, prediction.fully_mapped, prediction.headline())
        return CompileResult(prediction, path, [], None)

    compiler = _find_compiler(config, prediction)
    command = [compiler] + _arguments(config, Path("OUT"), Path(model.name))
    with tempfile.TemporaryDirectory(prefix=".compile-", dir=run_dir) as scratch:
        work = Path(scratch)
        source = work / model.name
        shutil.copyfile(model, source)
        # A failure raises before anything in RUN is touched: an earlier compiled model (still
        # valid for the int8 model it was compiled from, see `compiled_from`) and its report stay.
        console = _call(compiler, _arguments(config, work, source), config.timeout)
        outputs = sorted(work.glob("*_edgetpu.tflite"), key=_segment_number)
        logs = sorted(work.glob("*_edgetpu.log"))
        parsed = compiler_log.parse(console, logs[0].read_text() if logs else "")
        if not parsed.succeeded or not outputs:
            reason = parsed.fatal or ("the compiler reported success but wrote no model" if parsed.succeeded
                                      else "no 'Model compiled successfully' in its output")
            raise PipelineError(f"edgetpu_compiler failed: {reason}. Last output:\n" + "\n".join(console.strip().splitlines()[-8:]))
        report["compiler"] = {"path": compiler, "command": command, **parsed.as_dict()}
        report["disagreements"] = disagreements(prediction, parsed)
        _forget_compiled(run_dir)  # replaced: a previous compile may have had other segments
        manifest = manifest_mod.load(run_dir)
        written = _install_outputs(run_dir, manifest, outputs, logs)
    report_path = _record_report(run_dir, report)
    say(f"compiler {parsed.version}: {parsed.ops_on_edgetpu} ops on the Edge TPU, {parsed.ops_on_cpu} on the CPU, "
        f"{parsed.subgraphs} Edge TPU subgraph(s)")
    for line in report["disagreements"]:
        say(f"pre-flight and compiler disagree: {line}")
    _require_full_mapping(config, (parsed.ops_on_cpu or 0) == 0, f"compiler: {parsed.ops_on_cpu} ops run on the CPU")
    return CompileResult(prediction, report_path, written, parsed)


def _require_full_mapping(config: CompileConfig, fully_mapped: bool, why: str) -> None:
    if config.require_full_mapping and not fully_mapped:
        raise PipelineError(f"--require-full-mapping: not every op maps to the Edge TPU ({why})")


def _find_compiler(config: CompileConfig, prediction: preflight.Preflight) -> str:
    if config.compiler:
        path = Path(config.compiler)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(f"--compiler {config.compiler} is not an executable file")
        return str(path)
    found = shutil.which("edgetpu_compiler")
    if not found:
        raise HardwareUnavailable(f"edgetpu_compiler not found on PATH. {prediction.headline()}. {INSTALL_HINT}")
    return found


def _arguments(config: CompileConfig, out_dir: Path, model: Path) -> List[str]:
    args = ["-s", "-o", str(out_dir), "-t", str(config.timeout)]
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


def _call(compiler: str, args: List[str], timeout: int) -> str:
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


def _segment_number(path: Path) -> int:
    """0 for a single output; k for `X_segment_k_of_N_edgetpu.tflite` (numeric order: 10 after 9)."""
    m = re.search(r"_segment_(\d+)_of_\d+_edgetpu\.tflite$", path.name)
    return int(m.group(1)) if m else 0


def _is_compiled_key(key: str) -> bool:
    return key == "model_int8_edgetpu" or key.startswith("model_int8_edgetpu_segment_")


def _forget_compiled(run_dir: Path) -> List[str]:
    """Remove compiled models recorded in RUN (files, sidecars, records); returns their paths."""
    manifest = manifest_mod.load(run_dir)
    removed = []
    for key in [k for k in manifest.get("artifacts", {}) if _is_compiled_key(k)]:
        path = run_dir / manifest["artifacts"][key]["path"]
        for stale in (path, path.with_name(path.name + ".json")):
            if stale.exists():
                stale.unlink()
        removed.append(manifest["artifacts"][key]["path"])
        manifest_mod.forget_artifact(manifest, key)
    if removed:
        manifest_mod.save(run_dir, manifest)
    return removed


def _install_outputs(run_dir: Path, manifest: dict, outputs: List[Path], logs: List[Path]) -> List[Path]:
    """Move the compiled model(s) into RUN (same file system: atomic renames), record them, write sidecars."""
    written = []
    single = len(outputs) == 1
    for k, produced in enumerate(outputs):
        key = "model_int8_edgetpu" if single else f"model_int8_edgetpu_segment_{k}"
        final = run_dir / ("model_int8_edgetpu.tflite" if single else produced.name)
        os.replace(produced, final)
        manifest_mod.record_artifact(manifest, run_dir, key, final,
                                             compiled_from=manifest["artifacts"]["model_int8"]["sha256"])
        facts = {"image_size": manifest["model"]["image_size"]}
        if "input" in manifest["artifacts"]["model_int8"]:  # the device quantizes pixels with it
            facts["input"] = manifest["artifacts"]["model_int8"]["input"]
        write_sidecar(final, labels=manifest["labels"], **facts)
        written.append(final)
    for log in logs:
        os.replace(log, run_dir / log.name)
    manifest_mod.save(run_dir, manifest)
    return written


def _record_report(run_dir: Path, report: dict) -> Path:
    path = write_json_atomic(run_dir / "edgetpu.json", report)
    manifest = manifest_mod.load(run_dir)
    manifest_mod.record_artifact(manifest, run_dir, "edgetpu_report", path)
    manifest_mod.save(run_dir, manifest)
    return path


def disagreements(prediction: preflight.Preflight, parsed: compiler_log.CompilerOutput) -> List[str]:
    """Where the compiler's per-op statuses differ from the prediction, one line each."""
    predicted = compiler_log.status_counts(prediction.rows)
    actual = compiler_log.status_counts(parsed.operators)
    lines = []
    for key in sorted(set(predicted) | set(actual)):
        if predicted.get(key, 0) != actual.get(key, 0):
            lines.append(f"{key[0]} '{key[1]}': predicted {predicted.get(key, 0)}, compiler {actual.get(key, 0)}")
    return lines
