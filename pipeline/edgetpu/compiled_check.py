"""Check what edgetpu_compiler wrote before the compile stage installs it.

A compiler that exits 0 is not trusted on its word: each output must be a real Edge TPU model
(it holds `edgetpu-custom-op` carrying a readable DarwiNN package that
needs no newer Edge TPU runtime than was asked for with -m), the first one must take the source model's
inputs and the outputs must give its outputs (dtype, shape, quantization), and segments made with
`-n` must chain: every input of a segment is an input of the source model or an output of an
earlier segment (Google's two-segment SSD reference pair chains this way).
The ops a compiled file keeps outside the custom op are what runs on the CPU: that list comes from
the file itself, not from the compiler's log.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, NamedTuple, Optional, Sequence

from edge.model.tflite_file import (
    EDGETPU_CUSTOM_OP,
    ModelFileError,
    TensorSignature,
    cpu_ops,
    edgetpu_min_runtime_versions,
    io_signatures,
    read_model,
)
from pipeline.errors import PipelineError


class CompiledFacts(NamedTuple):
    name: str  # file name of the compiled model
    cpu_ops: List[str]  # ops outside edgetpu-custom-op, in file order (custom ops by custom code)
    inputs: List[TensorSignature]
    outputs: List[TensorSignature]
    min_runtime_version: int  # the newest any of its Edge TPU packages needs

    def as_dict(self) -> dict:
        return {"name": self.name, "cpu_ops": self.cpu_ops, "min_runtime_version": self.min_runtime_version,
                "inputs": [s.describe() for s in self.inputs], "outputs": [s.describe() for s in self.outputs]}


def read_compiled(path: Path, runtime: Optional[int] = None) -> CompiledFacts:
    """Facts of one compiled model; refuses a file that is not an Edge TPU model, or one that needs
    a newer Edge TPU runtime than `runtime` (libedgetpu refuses such a package on the device)."""
    try:
        info = read_model(path)
        versions = edgetpu_min_runtime_versions(path)
    except ModelFileError as err:
        raise PipelineError(f"the compiler wrote {Path(path).name}, which is not a readable model: {err}") from err
    if not any(op.name == EDGETPU_CUSTOM_OP for op in info.ops):
        raise PipelineError(f"the compiler wrote {Path(path).name} without an {EDGETPU_CUSTOM_OP}: it is not an Edge TPU "
                            f"model (ops: {', '.join(sorted({op.name for op in info.ops})) or 'none'})")
    needs = max(versions)
    if runtime is not None and needs > runtime:
        raise PipelineError(f"{Path(path).name} needs Edge TPU runtime {needs}, newer than --min-runtime-version {runtime}")
    inputs, outputs = io_signatures(info)
    return CompiledFacts(Path(path).name, [op.name for op in cpu_ops(info)], inputs, outputs, needs)


def _same(a: TensorSignature, b: TensorSignature) -> bool:
    """Equal dtype, shape and quantization; names may differ (the compiler renames some tensors)."""
    return a[1:] == b[1:]


def check_io(source: Path, compiled: Sequence[CompiledFacts]) -> None:
    """The compiled model(s) take the source's inputs and give its outputs, in order."""
    want_in, want_out = io_signatures(read_model(source))
    first, last = compiled[0], compiled[-1]
    if len(compiled) == 1:
        _compare("input", want_in, first.inputs, first.name)
        _compare("output", want_out, last.outputs, last.name)
        return
    check_chain(compiled, want_in)
    produced = [s for c in compiled for s in c.outputs]
    for want in want_out:
        if not any(_same(want, got) for got in produced):
            raise PipelineError(f"no segment gives the source model's output {want.describe()}")


def _compare(kind: str, want: List[TensorSignature], got: List[TensorSignature], name: str) -> None:
    if len(want) != len(got):
        raise PipelineError(f"{name} has {len(got)} {kind}(s), the source model has {len(want)}: not the model that was compiled")
    for k, (w, g) in enumerate(zip(want, got)):
        if not _same(w, g):
            raise PipelineError(f"{name} {kind} {k} is {g.describe()}, expected the source model's {w.describe()}")


def check_chain(segments: Sequence[CompiledFacts], source_inputs: List[TensorSignature]) -> None:
    """Each segment's inputs are source inputs or outputs of earlier segments (same name and signature)."""
    available = list(source_inputs)
    for k, segment in enumerate(segments):
        for want in segment.inputs:
            # By name as well: pipelined runners hand tensors from segment to segment by name.
            if not any(_same(want, got) and (k == 0 or got.name == want.name) for got in available):
                raise PipelineError(f"segment {k} ({segment.name}) needs input {want.describe()}, which no earlier "
                                    "segment gives: the segments do not chain")
        available += segment.outputs
