"""`pipeline compile`: Edge TPU pre-flight, then Google's edgetpu_compiler, then a check of what it wrote.

    pipeline compile runs/digits --check-only     prediction only; works on any machine
    pipeline compile model.tflite --check-only --json   the same for any .tflite file, as JSON on stdout
    pipeline compile runs/digits                  needs edgetpu_compiler (x86-64 Linux)

Writes RUN/edgetpu.json (the pre-flight, the compiler's parsed log, the ops each compiled file
keeps on the CPU, and where prediction and compiler disagree) and, when the compiler succeeds and
its output checks out (pipeline/edgetpu/compiled_check.py), RUN/model_int8_edgetpu.tflite with a sidecar
for the device. A failed, timed-out or refused compile leaves the run as it was; `--check-only`
never replaces a report that holds a compiler's results. Each compiled model records the sha256 of
the int8 model it came from (`compiled_from`), so a stale one is refused where it would ship.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

from edge.model.integrity import sidecar_path, sidecar_record
from edge.model.tflite_file import ModelFileError
from pipeline import metadata
from pipeline.edgetpu import agreement, compiled_check, compiler_log, preflight
from pipeline.edgetpu import compiler as compiler_mod
from pipeline.report import write as write_report
from pipeline.errors import ConfigError, PipelineError
from pipeline.rundir.files import json_bytes, scratch_folder
from pipeline.rundir.run import Run, artifact, is_compiled, writing

@dataclass(frozen=True)
class CompileConfig:
    check_only: bool = False  # pre-flight only: no compiler needed
    require_full_mapping: bool = False  # fail when any op is predicted (or compiled) to run on the CPU
    compiler: Optional[str] = None  # path to edgetpu_compiler; None = look it up on PATH
    timeout: Optional[int] = None  # seconds, passed as -t and enforced on the process; None = compiler.DEFAULT_TIMEOUT
    num_segments: Optional[int] = None  # -n: split for pipelining across several Edge TPUs
    min_runtime_version: Optional[int] = None  # -m: oldest Edge TPU runtime the model must run on
    intermediate_tensors: Optional[str] = None  # -i: comma-separated tensor names to output from the TPU op
    search_delegate: bool = False  # -d: on failure, retry with the stopping point moved earlier
    delegate_search_step: Optional[int] = None  # -k: step in ops for -d

    @property
    def seconds(self) -> int:
        return compiler_mod.DEFAULT_TIMEOUT if self.timeout is None else self.timeout

    def validate(self) -> None:
        """Refuse options that would be accepted and then ignored."""
        if self.delegate_search_step is not None and not self.search_delegate:
            raise ConfigError("--delegate-search-step is the step of --search-delegate; give --search-delegate too, or leave it out")
        if self.check_only:
            ignored = [name for name, value in (("--compiler", self.compiler), ("--timeout", self.timeout),
                                                ("--num-segments", self.num_segments),
                                                ("--intermediate-tensors", self.intermediate_tensors),
                                                ("--search-delegate", self.search_delegate or None)) if value is not None]
            if ignored:
                raise ConfigError(f"{', '.join(ignored)} configure the compiler, which --check-only does not run; "
                                  "leave them out, or drop --check-only")


class CompileResult(NamedTuple):
    preflight: preflight.Preflight
    report_path: Optional[Path]  # RUN/edgetpu.json; None for a bare .tflite file (nothing written)
    models: List[Path]  # compiled models written into RUN (empty with --check-only)
    compiler: Optional[compiler_log.CompilerOutput]
    # Why not every op is shown to run on the Edge TPU (what --require-full-mapping refuses), with the first change
    # to make; None when every op is. From the compiled files and logs after a compile, else from the pre-flight.
    unmapped: Optional[str] = None


def compile_for_edgetpu(config: CompileConfig, target: Path, say=print, show=None) -> CompileResult:
    """Pre-flight always; the compiler unless check_only. `target` is a run directory or, with
    check_only, a .tflite file. `show(prediction)` is called as soon as the prediction exists."""
    config.validate()
    target = Path(target)
    if target.is_file():
        return _check_file(config, target, say, show)
    if not target.exists():
        raise ConfigError(f"{target} does not exist; expected a run directory or a .tflite file")
    with writing(target, "pipeline compile") as run:
        model = run.artifact("model_int8")
        prediction = _predict(config, model, say, show)
        report = {"schema_version": artifact("edgetpu_report").schema, "model": run.entry("model_int8")["path"],
                  "model_sha256": run.entry("model_int8")["sha256"], "preflight": prediction.as_dict(),
                  "compiler": None, "compiled": None, "disagreements": []}
        if config.check_only:
            path = _record_check_only(run, report, say)
            write_report(run.dir)  # RUN/report.html; a failure to render only warns
            unmapped = _require_full_mapping(config, predicted_unmapped(prediction))
            return CompileResult(prediction, path, [], None, unmapped)
        run.contract_of("model_int8")  # the compiled model's sidecar needs it: refuse before compiling, not after
        compiler = compiler_mod.find(config, prediction.headline())
        with scratch_folder(run.dir, prefix=".compile-") as scratch:
            # A failure raises before anything in RUN is touched: an earlier compiled model (still
            # valid for the int8 model it was compiled from, see `compiled_from`) and its report stay.
            compiled, outputs, logs, parsed, unmapped = _compile(config, compiler, model, scratch, prediction, report, say)
            written, report_path = _install(run, report, outputs, logs)
        write_report(run.dir)
    on_cpu = sum(len(c.cpu_ops) for c in compiled)
    say(f"compiler {parsed.version}: {len(outputs)} Edge TPU model(s) checked; {on_cpu} op(s) left on the CPU "
        f"({', '.join(op for c in compiled for op in c.cpu_ops) or 'none'}); log: {parsed.ops_on_edgetpu} ops on the "
        f"Edge TPU, {parsed.ops_on_cpu} on the CPU, {parsed.subgraphs} Edge TPU subgraph(s)")
    for line in report["disagreements"]:
        say(f"pre-flight and compiler disagree: {line}")
    return CompileResult(prediction, report_path, written, parsed, unmapped)


def _compile(config: CompileConfig, compiler: str, model: Path, work: Path, prediction: preflight.Preflight, report: dict,
             say):
    """Run the compiler on a copy of `model` in `work` and check what it wrote; fills `report`'s compiler parts.
    Returns (compiled facts, output models, their logs, the parsed console, why not every op maps or None)."""
    source = work / model.name
    shutil.copyfile(model, source)
    console = compiler_mod.call(compiler, compiler_mod.arguments(config, work, source), config.seconds)
    outputs = sorted(work.glob("*_edgetpu.tflite"), key=_segment_number)
    logs = [out.with_suffix(".log") for out in outputs]
    parsed = compiler_log.parse(console, logs[0].read_text() if logs and logs[0].exists() else "")
    if not parsed.succeeded or not outputs:
        reason = parsed.fatal or ("the compiler reported success but wrote no model" if parsed.succeeded
                                  else "no 'Model compiled successfully' in its output")
        raise PipelineError(f"edgetpu_compiler failed: {reason}. Last output:\n" + "\n".join(console.strip().splitlines()[-8:]))
    if config.num_segments and len(outputs) != config.num_segments:
        raise PipelineError(f"asked for {config.num_segments} segments, the compiler wrote {len(outputs)} model(s): "
                            f"{', '.join(out.name for out in outputs)}")
    compiled = [compiled_check.read_compiled(out, config.min_runtime_version) for out in outputs]
    compiled_check.check_io(model, compiled)
    # Only once it is known to be the compiled model (metadata changes neither its ops nor its inputs and outputs).
    if len(outputs) == 1 and metadata.restore(source, outputs[0]):
        say(f"the compiler dropped the int8 model's TFLite metadata: put back into {outputs[0].name}")
    tables = [_operator_table(log, console if len(outputs) == 1 else "") for log in logs]
    if len(outputs) > 1:  # every segment's log counts, not only the first one's
        parsed = parsed._replace(operators=[row for table in tables if table for row in table])
    report["compiler"] = {"path": compiler, "command": [compiler] + compiler_mod.arguments(config, Path("OUT"), Path(model.name)),
                          **parsed.as_dict()}
    report["compiled"] = [dict(c.as_dict(), log_table_read=t is not None) for c, t in zip(compiled, tables)]
    report["disagreements"] = agreement.disagreements(prediction, parsed, compiled)
    unmapped = _compiled_unmapped(compiled, tables, [log.name for log in logs], parsed.ops_on_cpu)
    if unmapped and prediction.advice():
        unmapped += f"; the pre-flight's first change: {_first_change(prediction)}"
    _require_full_mapping(config, unmapped)  # before anything is installed in RUN
    return compiled, outputs, [log for log in logs if log.exists()], parsed, unmapped


def _predict(config: CompileConfig, model: Path, say, show) -> preflight.Preflight:
    try:
        prediction = preflight.analyze(model, runtime=config.min_runtime_version or preflight.rules.DEFAULT_RUNTIME)
    except ModelFileError as err:
        raise PipelineError(f"cannot run the pre-flight on {model}: {err}") from err
    if show:
        show(prediction)
    say(preflight.table(prediction))
    return prediction


def _check_file(config: CompileConfig, model: Path, say, show) -> CompileResult:
    """Pre-flight of a bare .tflite file: nothing is written."""
    if not config.check_only:
        # Outputs of a full compile belong in a run, with the labels and sidecars the device needs.
        raise ConfigError(f"{model} is a model file: a full compile needs a run directory (made by `pipeline export RUN "
                          "--int8`); for any .tflite file use --check-only, or run edgetpu_compiler on it yourself")
    prediction = _predict(config, model, say, show)
    unmapped = _require_full_mapping(config, predicted_unmapped(prediction))
    return CompileResult(prediction, None, [], None, unmapped)


def _record_check_only(run: Run, report: dict, say) -> Path:
    """Record the prediction, unless RUN/edgetpu.json holds a compiler's report of this same int8 model."""
    if run.has("edgetpu_report"):
        try:
            earlier = json.loads(run.artifact("edgetpu_report").read_text())
        except (OSError, ValueError, PipelineError):
            earlier = None
        if isinstance(earlier, dict) and earlier.get("compiler") and earlier.get("model_sha256") == report["model_sha256"]:
            say(f"kept {run.path('edgetpu_report')}: it holds the compiler's report of this model; this pre-flight is not recorded")
            return run.path("edgetpu_report")
    with run.transaction() as t:
        return t.write("edgetpu_report", json_bytes(report))


def _operator_table(log: Path, console: str) -> Optional[List[compiler_log.OperatorRow]]:
    """The operator table of one output's .log (or, for a single output, of the -s console); None when unreadable."""
    rows = compiler_log.parse_operator_table(log.read_text(errors="replace")) if log.exists() else []
    return rows or compiler_log.parse_operator_table(console) or None


def _compiled_unmapped(compiled, tables, log_names, ops_on_cpu: Optional[int]) -> Optional[str]:
    """Why the compiled outputs do not show every op on the Edge TPU, by their files and by their logs (a count
    that cannot be read never passes); None when they do."""
    for facts, table, log_name in zip(compiled, tables, log_names):
        if facts.cpu_ops:
            return f"{facts.name} keeps {len(facts.cpu_ops)} op(s) on the CPU ({', '.join(facts.cpu_ops)})"
        if table is None:
            return (f"cannot read the op counts for {facts.name}: {log_name} is missing or has no operator table (and the "
                    "console printed none)")
        off = sum(r.count for r in table if r.status != preflight.rules.MAPPED)
        if off:
            return f"{log_name} lists {off} op(s) not mapped to the Edge TPU"
    if ops_on_cpu:
        return f"the compiler says {ops_on_cpu} op(s) run on the CPU"
    return None


def predicted_unmapped(prediction: preflight.Preflight) -> Optional[str]:
    """Why the pre-flight does not predict every op on the Edge TPU, with the first change to make; None when it does."""
    if prediction.fully_mapped:
        return None
    change = f"; first change: {_first_change(prediction)}" if prediction.advice() else ""
    return f"not every op maps to the Edge TPU ({prediction.headline()}){change}"


def _first_change(prediction: preflight.Preflight) -> str:
    entry = prediction.advice()[0]
    return f"{entry['heading']}: {entry['advice']}"


def _require_full_mapping(config: CompileConfig, unmapped: Optional[str]) -> Optional[str]:
    """The --require-full-mapping gate: refuses when not every op maps; returns `unmapped` otherwise."""
    if config.require_full_mapping and unmapped:
        raise PipelineError(f"--require-full-mapping: {unmapped}")
    return unmapped


def _segment_number(path: Path) -> int:
    """0 for a single output; k for `X_segment_k_of_N_edgetpu.tflite` (numeric order: 10 after 9)."""
    m = re.search(r"_segment_(\d+)_of_\d+_edgetpu\.tflite$", path.name)
    return int(m.group(1)) if m else 0


def _install(run: Run, report: dict, outputs: List[Path], logs: List[Path]) -> Tuple[List[Path], Path]:
    """The compiled model(s) with their sidecars and logs, and the report, into RUN with the manifest, all or
    nothing; compiled models of an earlier compile (maybe other segments) go in the same step."""
    source, contract = run.entry("model_int8"), run.contract_of("model_int8").as_record()
    facts = {"image_size": run.image_size, "preprocessing": contract}
    if "input" in source:  # the device quantizes pixels with it
        facts["input"] = source["input"]
    single = len(outputs) == 1
    written = []
    with run.transaction() as t:
        for key in [k for k in run.recorded() if is_compiled(k)]:
            t.forget(key)
        for k, produced in enumerate(outputs):
            key = "model_int8_edgetpu" if single else f"model_int8_edgetpu_segment_{k}"
            final = t.write(key, produced, name=None if single else produced.name, preprocessing=contract,
                            compiled_from=source["sha256"])
            sidecar = sidecar_record(final.name, produced.read_bytes(), labels=run.labels, **facts)
            t.write_file(sidecar_path(final), json_bytes(sidecar))
            written.append(final)
        for log in logs:
            t.write_file(run.dir / log.name, log)
        report_path = t.write("edgetpu_report", json_bytes(report))
    return written, report_path
