"""The cost gates' advice, followed: `pipeline compile RUN --max-latency-ms X` / `--require-on-chip` fail naming the
largest input size or width that fits and the commands that rebuild the run with it; those commands are run as
printed, and the gate then passes on the rebuilt model (its real pre-flight, not the scaled estimate).
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest

from edge.model.tflite_file import read_model
from pipeline.edgetpu import cost, preflight
from pipeline.edgetpu.cost import gate
from pipeline.edgetpu.cost.scaling import rescaled
from tests.support.helpers import REPO, quiet_env

REFERENCE = REPO.parent / "shared" / "reference" / "coral"


def pipeline(args, cwd):
    """`pipeline ARGS` as a user runs it, from `cwd` (where relative paths in the advice resolve)."""
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, timeout=900,
                          env=quiet_env(PYTHONPATH=str(REPO)), cwd=cwd)


def _ok(result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _advised_commands(output: str):
    """The `&&`-joined commands after 'retrain at it:' in the gate's message, and the OPTIONS.json it asks for."""
    m = re.search(r"retrain at it: (.+?)(?: \(OPTIONS\.json: (\{.*\})\))?$", output, re.M)
    assert m, output
    return [shlex.split(c) for c in m.group(1).split(" && ")], (json.loads(m.group(2)) if m.group(2) else None)


def _follow(output: str, cwd):
    commands, options = _advised_commands(output)
    if options is not None:
        (cwd / "OPTIONS.json").write_text(json.dumps(options))
    for words in commands:
        assert words[0] == "pipeline"
        last = pipeline(words[1:], cwd)
    return commands, last


def _predicted_ms(run_dir, device):
    return json.loads((run_dir / "edgetpu.json").read_text())["cost"]["devices"][device]["total_ms"]


@pytest.mark.slow  # trains and exports two small models
@pytest.mark.parametrize("device", ["usb3", "usb2"])
def test_latency_advice_names_a_size_whose_retrained_model_meets_the_budget(tmp_path, device):
    run = tmp_path / "digits"
    _ok(pipeline(["train", "--data", "digits", "--model", "small_cnn", "--image-size", "64", "--epochs", "1",
                  "--out", "digits"], tmp_path))
    _ok(pipeline(["export", "digits", "--int8"], tmp_path))
    _ok(pipeline(["compile", "digits", "--check-only"], tmp_path))
    as_is = _predicted_ms(run, device)
    # A budget between the model as it is and the same model at 32 px (the cost model's own scaling).
    data = (run / "model_int8.tflite").read_bytes()
    info, estimate = read_model(data), cost.for_model(data, preflight.analyze(data))
    at_32 = cost.predict.estimate_cost(rescaled(estimate.cost, info, 32 / 64), 0.0).time(device).total_ms
    budget = round((as_is + at_32) / 2, 4)
    failed = pipeline(["compile", "digits", "--check-only", "--max-latency-ms", f"{budget:g}", "--latency-device", device],
                      tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    size = int(re.search(r"the largest input size that meets it is (\d+)x\1", failed.stderr).group(1))
    assert 32 < size < 64
    commands, last = _follow(failed.stderr, tmp_path)
    assert ["--image-size", str(size)] == commands[0][commands[0].index("--image-size"):][:2]
    assert commands[-1][commands[-1].index("--latency-device") + 1] == device  # judged again on the same device
    _ok(last)  # the advised compile, with the same gate, passes on the model retrained at that size
    rebuilt = tmp_path / f"digits-{size}px"
    assert read_model(rebuilt / "model_int8.tflite").tensors[read_model(rebuilt / "model_int8.tflite").inputs[0]].shape[1] == size
    assert _predicted_ms(rebuilt, device) <= budget


@pytest.mark.slow  # trains and exports two models of about 9 MB
def test_on_chip_advice_names_a_width_whose_retrained_model_is_cached_whole(tmp_path):
    (tmp_path / "wide.json").write_text(json.dumps({"model_options": {"width": 320}}))
    _ok(pipeline(["train", "--config", "wide.json", "--data", "digits", "--model", "small_cnn", "--image-size", "16",
                  "--epochs", "1", "--out", "wide"], tmp_path))
    _ok(pipeline(["export", "wide", "--int8"], tmp_path))
    failed = pipeline(["compile", "wide", "--check-only", "--require-on-chip"], tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "--require-on-chip:" in failed.stderr and "streamed from the host" in failed.stderr
    width = int(re.search(r"the largest width whose parameters all fit is (\d+)", failed.stderr).group(1))
    assert width < 320
    commands, last = _follow(failed.stderr, tmp_path)
    _ok(last)  # the advised compile with --require-on-chip passes on the narrower model
    report = json.loads((tmp_path / f"wide-width{width}" / "edgetpu.json").read_text())["cost"]
    assert report["streamed_bytes"] == 0 and report["all_cached"]


def test_a_detector_s_advice_names_the_size_to_give_frigate():
    path = REFERENCE / "mobilenet_edgetpu_0.75_224_post_training_quant.tflite"
    data = path.read_bytes()
    info, estimate = read_model(data), cost.for_model(data, preflight.analyze(data))
    budget = estimate.time("usb3").total_ms - 1e-3
    from pipeline import tasks

    facts = gate.RunFacts("runs/det", {"task": "detect", "data": "coco.json", "model": "mobilenet_v2", "image_size": 224,
                                       "epochs": 10}, 32, 32, tasks.get("detect").size_note)  # a detector's coarsest stride
    message = gate.check(gate.Gate(budget, False, "usb3"), estimate, info, facts)
    size = int(re.search(r"the largest input size that meets it is (\d+)x\1", message).group(1))
    assert f"Frigate is then given that size as its model's `width: {size}` and `height: {size}`" in message
    commands, _ = _advised_commands(message)
    assert commands[0][:4] == ["pipeline", "train", "--task", "detect"] and f"runs/det-{size}px" in commands[0]
