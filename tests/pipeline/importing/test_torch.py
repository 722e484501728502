"""The PyTorch side of the ONNX import, as a user has it: the tests' torch venv, `.ci/ultralytics-env` (a CPU-only torch, onnx, onnxscript; nothing of ours)
runs the user's own script (tests/fixtures/make_tiny_onnx.py: train a small CNN, torch.onnx.export), and what it writes
answers as the committed tests/fixtures/tiny_classifier.onnx does, the model tests/pipeline/importing/test_onnx.py takes through
`pipeline import`, export, pre-flight and parity. So the fixture those tests read is what the script makes today."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.support.helpers import REPO, quiet_env, write_class_folders

pytestmark = [pytest.mark.host, pytest.mark.slow]

FIXTURE = REPO / "tests" / "fixtures" / "tiny_classifier.onnx"


def test_the_users_pytorch_script_makes_the_committed_onnx_model(tmp_path_factory, tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="the `import` extra (README command 2) brings onnxruntime")
    from tests.support.device_env import shared_env

    torch_python = shared_env(tmp_path_factory, "ultralytics-env") / "bin" / "python"
    data = write_class_folders(tmp_path / "shapes", per_class=50)  # what the committed model was trained on
    done = subprocess.run([str(torch_python), str(REPO / "tests" / "fixtures" / "make_tiny_onnx.py"), str(data), str(tmp_path)],
                          capture_output=True, text=True, timeout=900, env=quiet_env())
    assert done.returncode == 0, done.stderr[-3000:]
    made = tmp_path / "model.onnx"
    rng = np.random.default_rng(0)
    images = rng.normal(size=(8, 1, 3, 32, 32)).astype(np.float32)  # ImageNet-normalized NCHW, batch 1 as exported
    answers = []
    for path in (made, FIXTURE):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        answers.append(np.concatenate([session.run(None, {"input": image})[0] for image in images]))
    assert answers[0].shape == answers[1].shape == (8, 3)
    np.testing.assert_allclose(answers[0], answers[1], atol=1e-4)
