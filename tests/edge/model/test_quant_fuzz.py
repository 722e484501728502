"""No quantization table can kill the interpreter: thousands of mutants of the committed int8 models' scales, zero
points, vector lengths and quantized dimensions, each refused by edge.model.check (ModelCheckError) or loaded and
run by the interpreter in a child process that must not die by a signal.

The default suite runs FUZZ_MUTANTS (a few hundred per model, seconds); EDGEFLOW_FUZZ_MUTANTS=5000 runs more.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge import ModelCheckError
from edge.model.check import check_model
from tests.support.edge_paths import FIXTURES, INT8
from tests.support.quant_mutants import mutate, quantization_fields

FUZZ_MUTANTS = int(os.environ.get("EDGEFLOW_FUZZ_MUTANTS", "300"))
DETECTOR = FIXTURES / "tiny_detector_int8.tflite"

# Loads, allocates and invokes each model named on stdin; says which one it starts, so a death names its mutant.
WORKER = """
import sys
import numpy as np
import edge
for line in sys.stdin:
    path = line.strip()
    print("start", path, flush=True)
    try:
        interpreter = edge.make_interpreter(path, edgetpu=False)
        for d in interpreter.get_input_details():
            interpreter.set_tensor(d["index"], np.full(d["shape"], 3, d["dtype"]))
        interpreter.invoke()
        for d in interpreter.get_output_details():
            interpreter.get_tensor(d["index"])
    except (edge.EdgeError, RuntimeError, ValueError):
        pass  # refused with a Python exception: what the CLI turns into one line
"""


def _run_all(paths):
    """The mutants that killed a worker, with the signal; a worker restarts after the one that killed it."""
    crashed, left = [], list(paths)
    while left:
        worker = subprocess.run([sys.executable, "-c", WORKER], input="\n".join(map(str, left)) + "\n",
                                capture_output=True, text=True, timeout=600)
        started = [line.split(" ", 1)[1] for line in worker.stdout.splitlines() if line.startswith("start ")]
        if worker.returncode == 0:
            break
        assert started, f"worker failed before any mutant: {worker.stderr[-1500:]}"
        crashed.append((started[-1], worker.returncode))
        left = left[left.index(Path(started[-1])) + 1:]
    return crashed


@pytest.mark.parametrize("model", [INT8, DETECTOR], ids=["classifier", "detector"])
def test_quantization_mutants_are_refused_or_run(model, tmp_path):
    data = model.read_bytes()
    fields = quantization_fields(data)
    assert fields, "the fixture has quantized tensors to mutate"
    rng = np.random.default_rng(39)
    accepted, refused = [], 0
    for i in range(FUZZ_MUTANTS):
        mutant = mutate(data, fields, rng, words=int(rng.integers(1, 4)))
        try:
            check_model(mutant, name=f"mutant{i}")
        except ModelCheckError:
            refused += 1
            continue
        path = tmp_path / f"mutant{i:05d}.tflite"
        path.write_bytes(mutant)
        accepted.append(path)
    crashed = _run_all(accepted)
    print(f"\n{model.name}: {FUZZ_MUTANTS} mutants, {refused} refused by the check, {len(accepted)} run, {len(crashed)} crashed")
    assert not crashed, f"mutants that passed the check killed the interpreter (file, signal): {crashed[:10]}"
    assert refused and accepted, "the mutants must exercise both the check and the interpreter"


@pytest.mark.parametrize("scale", [0.0, 1e-40, 1e-45, float("nan"), float("inf"), -0.5])
def test_a_scale_an_interpreter_cannot_survive_is_refused(scale):
    import struct

    data = bytearray(INT8.read_bytes())
    activation = quantization_fields(bytes(data))[0]  # the input tensor: zero and denormals crash here (SIGSEGV)
    struct.pack_into("<f", data, activation.scale_at + 4, scale)
    with pytest.raises(ModelCheckError, match="quantization scale"):
        check_model(bytes(data), name="scaled")


@pytest.mark.parametrize("scale", [0.0, 1e-40])
def test_edge_classify_refuses_the_audits_scale_in_one_line(scale, tmp_path):
    """The audit's finding: a scale of 0 or 1e-40 on one tensor ended `edge classify` in SIGSEGV/SIGABRT."""
    import struct

    data = bytearray(INT8.read_bytes())
    struct.pack_into("<f", data, quantization_fields(bytes(data))[0].scale_at + 4, scale)
    model = tmp_path / "scaled.tflite"
    model.write_bytes(bytes(data))
    result = subprocess.run([sys.executable, "-m", "edge.cli", "classify", "--no-verify", str(model),
                             str(FIXTURES / "images" / "red.png")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "quantization scale" in result.stderr


def test_an_add_whose_output_scale_is_far_below_its_inputs_is_refused():
    """The audit's ~1e-12 abort: ADD requantizes to its output scale; XNNPACK and the kernels abort below 2**-10 of it."""
    import struct

    data = bytearray(DETECTOR.read_bytes())
    from edge.model.check import _Reader
    from edge.model.tflite_file import FILE_IDENTIFIER

    model = _Reader(bytes(data), "m").root(FILE_IDENTIFIER, "model")
    codes = [max(c.scalar(0, "<b"), c.scalar(3, "<i")) for c in model.tables(1, "operator_codes")]
    sub = model.tables(2, "subgraphs")[0]
    add = next(op for op in sub.tables(3, "operators") if codes[op.scalar(0, "<I")] == 0)
    out = sub.tables(0, "tensors")[add.vector(2, "<i", "outputs")[0]].table(4, "quantization")
    struct.pack_into("<f", data, out._target(2) + 4, 1e-8)  # an activation floor alone would let this through
    with pytest.raises(ModelCheckError, match="ADD has input scale .* ratio"):
        check_model(bytes(data), name="add")


def test_the_quantization_rules_pass_every_real_model_google_ships():
    """The per-operator rules are drawn from what interpreters survive, so they must not refuse a real model: every
    one of Google's Coral models in ../shared/reference (CPU and compiled twins) passes, except the one Google made
    broken on purpose, which stays refused for its damaged buffer, not for its quantization."""
    from tests.support.edge_paths import CORAL

    models = sorted(CORAL.glob("*.tflite"))
    if not models:
        pytest.skip(f"Google's reference models are not at {CORAL}")
    for path in models:
        if path.name == "model_invoking_error.tflite":
            with pytest.raises(ModelCheckError, match="buffer"):
                check_model(path.read_bytes(), name=path.name)
        else:
            check_model(path.read_bytes(), name=path.name)
