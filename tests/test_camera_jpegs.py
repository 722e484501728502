"""The whole device path on camera-size JPEGs: train on folders of real-photo crops, bundle the
original files, run `edge evaluate` in the device environment (Python 3.9, tflite-runtime, no
TensorFlow), and check the parity report tells the truth about what the device computed."""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.device_env import shared_env
from tests.helpers import cli, write_camera_jpegs

pytestmark = [pytest.mark.host, pytest.mark.slow]


@pytest.fixture(scope="module")
def device_env(tmp_path_factory) -> Path:
    """The device side as CI builds it (.ci/edge-env --make): its `edge` command."""
    return shared_env(tmp_path_factory, "edge-env") / "bin" / "edge"


def test_device_accuracy_on_original_jpegs_matches_the_parity_report(tmp_path: Path, device_env: Path):
    data = write_camera_jpegs(tmp_path / "photos", per_class=20)
    run = tmp_path / "run"
    trained = cli(["train", "--data", str(data), "--out", str(run), "--image-size", "32", "--epochs", "4",
                   "--batch-size", "8"], timeout=600)
    assert trained.returncode == 0, trained.stderr[-3000:]
    exported = cli(["export", str(run), "--int8"], timeout=600)
    assert exported.returncode == 0, exported.stderr[-3000:]
    bundle = tmp_path / "bundle"
    assert cli(["parity", str(run), "--bundle", str(bundle)]).returncode == 0

    # The bundle holds the original JPEG files, byte for byte.
    entries = json.loads((bundle / "bundle.json").read_text())["images"]
    assert entries and all(e["file"].endswith(".jpg") for e in entries)
    for e in entries:
        assert (bundle / e["file"]).read_bytes() == (data / e["id"]).read_bytes()
        assert hashlib.sha256((bundle / e["file"]).read_bytes()).hexdigest() == e["sha256"]

    predictions = tmp_path / "predictions.json"
    device = subprocess.run([str(device_env), "evaluate", str(bundle / "model_int8.tflite"), "--data", str(bundle),
                             "--out", str(predictions)], capture_output=True, text=True, timeout=300)
    assert device.returncode == 0, device.stderr[-3000:]
    # The device env's CPU interpreter (the `edge` extra's ai-edge-litert, chosen over its tflite-runtime), not the host's TF.
    assert json.loads(predictions.read_text())["backend"] == "ai_edge_litert"
    assert "interpreter: ai_edge_litert (the faster CPU interpreter of those installed" in device.stderr
    assert "recorded in" in device.stderr  # the pixel contract came from the bundle's records

    # Limits wide open: this test is about what the report says, the gate has tests of its own.
    gated = cli(["parity", str(run), "--device-results", str(predictions), "--max-drop", "100", "--min-agreement", "0"])
    assert gated.returncode == 0, gated.stderr[-3000:]
    report = json.loads((run / "parity" / "report.json").read_text())
    host, board = report["models"]["int8_cpu"], report["models"]["device_cpu"]
    assert board["images"] == len(entries)
    assert abs(host["correct"] - board["correct"]) <= 1, (host["correct"], board["correct"])
    assert "device_cpu" in report["gate"]["applies_to"]
