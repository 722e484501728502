"""Damaged, truncated and Edge-TPU-compiled models give clear errors, never a dead process."""
from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from edge import EdgeTpuUnavailable, InputError, ModelCheckError, make_interpreter
from edge.model.check import check_model
from tests.support.edge_paths import EDGETPU, FLOAT, INT8


def test_fixtures_pass_the_check():
    for path in (INT8, FLOAT, EDGETPU):
        info = check_model(path.read_bytes(), name=path.name)
        assert info.inputs and info.outputs


def test_truncated_model_is_a_clear_error(tmp_path: Path):
    data = INT8.read_bytes()
    for cut in (0, 7, 100, len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut{cut}.tflite"
        path.write_bytes(data[:cut])
        with pytest.raises(ModelCheckError, match=r"cut\d+\.tflite is (damaged|not)"):
            make_interpreter(path)


def test_not_a_tflite_file(tmp_path: Path):
    path = tmp_path / "notes.tflite"
    path.write_text("this is not a model, just some text long enough\n")
    with pytest.raises(ModelCheckError, match="expected b'TFL3'"):
        make_interpreter(path)


def test_compiled_model_without_edgetpu_is_a_clear_error():
    with pytest.raises(EdgeTpuUnavailable, match="libedgetpu1-std"):
        make_interpreter(EDGETPU)
    with pytest.raises(EdgeTpuUnavailable, match="libedgetpu1-std"):
        make_interpreter(EDGETPU, edgetpu=True)


def test_cpu_only_refuses_a_compiled_model_and_edgetpu_refuses_an_uncompiled_one():
    with pytest.raises(InputError, match="compiled for the Edge TPU .* cannot run on the CPU"):
        make_interpreter(EDGETPU, edgetpu=False)
    with pytest.raises(InputError, match="not compiled for the Edge TPU"):
        make_interpreter(INT8, edgetpu=True)


def test_edgetpu_refuses_batch_8(tmp_path: Path):
    # Edit the lookalike's input shape vector [1, 16, 16, 3] in place to [8, 16, 16, 3].
    data = EDGETPU.read_bytes()
    shape = (4).to_bytes(4, "little") + b"".join(v.to_bytes(4, "little") for v in (1, 16, 16, 3))
    assert data.count(shape) == 1
    batch8 = shape.replace((1).to_bytes(4, "little") + (16).to_bytes(4, "little"), (8).to_bytes(4, "little") + (16).to_bytes(4, "little"), 1)
    path = tmp_path / "batch8_edgetpu.tflite"
    path.write_bytes(data.replace(shape, batch8))
    with pytest.raises(InputError, match="batch size 8, expected 1"):
        make_interpreter(path)


# Run a damaged model in a child process: a crash there is a signal (negative return code).
CHILD = """
import sys
import numpy as np
import edge
try:
    interpreter = edge.make_interpreter(sys.argv[1], edgetpu=False)
    d = interpreter.get_input_details()[0]
    interpreter.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    interpreter.invoke()
    print("ran")
except edge.EdgeError as err:
    print("refused:", type(err).__name__)
except RuntimeError as err:  # ai_edge_litert's XNNPACK may refuse a damaged graph at the first invoke; edge's CLI says so
    print("refused by invoke:", err)
"""

FUZZ_COPIES = 60


def damaged_copies(data: bytes, count: int, seed: int):
    """`count` copies, each with 1..4 random bytes overwritten at random offsets (seeded)."""
    rng = random.Random(seed)
    for _ in range(count):
        copy = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            copy[rng.randrange(len(copy))] = rng.randrange(256)
        yield bytes(copy)


def test_damaged_models_are_rejected_or_do_not_crash(tmp_path: Path):
    rejected, ran, refused, crashed = 0, 0, 0, []
    for i, data in enumerate(damaged_copies(INT8.read_bytes(), FUZZ_COPIES, seed=1234)):
        try:
            check_model(data, name=f"copy{i}")
        except ModelCheckError:
            rejected += 1
            continue
        path = tmp_path / f"copy{i}.tflite"
        path.write_bytes(data)
        child = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=60)
        if child.returncode < 0:
            crashed.append((i, child.returncode))
        elif child.returncode == 0 and child.stdout.startswith("ran"):
            ran += 1
        else:
            assert child.returncode == 0, f"copy {i}: {child.stderr[-500:]}"
            refused += 1
    print(f"\nfuzz {FUZZ_COPIES} copies: rejected by check {rejected}, refused by interpreter {refused}, ran {ran}, crashed {len(crashed)}")
    assert not crashed, f"copies killed the interpreter (index, signal): {crashed}"
    assert rejected + ran + refused == FUZZ_COPIES
