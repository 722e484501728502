"""`pipeline parity --device-results` with the device's time per inference (`edge bench --json`): kept in the run,
put beside the cost model's prediction in parity/report.json, the printed summary and report.html, naming the device
that measured it. Here the files are made by the real `edge` commands on this machine's CPU interpreter, so the time
is a CPU time: shown, and not called an error of the Edge TPU prediction."""
from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.host


def _cli(main, *args):
    from click.testing import CliRunner

    return CliRunner().invoke(main, [str(a) for a in args])


def _pipeline(*args):
    from pipeline.cli import main

    return _cli(main, *args)


def _edge(*args):
    from edge.cli import main

    return _cli(main, *args)


@pytest.fixture
def run_copy(exported_run, tmp_path):
    shutil.copytree(exported_run, tmp_path / "run")
    return tmp_path / "run"


def test_a_cpu_time_from_edge_bench_is_recorded_beside_the_prediction_and_not_called_its_error(run_copy, tmp_path):
    assert _pipeline("compile", run_copy, "--check-only").exit_code == 0  # the prediction, in RUN/edgetpu.json
    predicted = json.loads((run_copy / "edgetpu.json").read_text())["cost"]["devices"]
    bench = tmp_path / "bench.json"
    out = _edge("bench", run_copy / "model_int8.tflite", "--runs", 5, "--json", bench)
    assert out.exit_code == 0, out.output
    measured = json.loads(bench.read_text())
    assert measured["edgetpu"] is False  # this machine has no Edge TPU: the CPU interpreter timed it

    result = _pipeline("parity", run_copy, "--device-results", bench)
    assert result.exit_code == 0, result.output
    timing = json.loads((run_copy / "parity" / "report.json").read_text())["device_timing"]
    assert timing["model"] == "model_int8" and timing["median_ms"] == measured["median_ms"]
    assert timing["measured_on"].startswith("the CPU interpreter (")
    compared = timing["predicted"]
    assert compared["comparable"] is False
    assert {r["device"]: r["predicted_ms"] for r in compared["rows"]} == {k: v["total_ms"] for k, v in predicted.items()}
    assert all(r["error_percent"] is None for r in compared["rows"])
    line = next(x for x in result.output.splitlines() if x.startswith("device time: "))
    assert f"measured {measured['median_ms']:.2f} ms per inference of model_int8 on the CPU interpreter" in line
    assert "not compared with the Edge TPU prediction" in line and "%" not in line

    # Kept in the run: the manifest records RUN/latency.json, and report.html shows it beside the prediction.
    manifest = json.loads((run_copy / "manifest.json").read_text())
    assert "latency" in manifest["artifacts"] and json.loads((run_copy / "latency.json").read_text()) == measured
    html = (run_copy / "report.html").read_text()
    table = html[html.index('data-table="predicted"'):]
    table = table[:table.index("</table>")]
    assert 'data-comparable="no"' in table and "no: a CPU time" in table and "%" not in table
    assert "Measured on the CPU interpreter (" in html


def test_answers_and_time_together_and_what_is_refused(run_copy, tmp_path):
    bundle, predictions, bench = tmp_path / "bundle", tmp_path / "predictions.json", tmp_path / "bench.json"
    assert _pipeline("parity", run_copy, "--bundle", bundle).exit_code == 0
    out = _edge("evaluate", bundle / "model_int8.tflite", "--data", bundle, "--out", predictions)
    assert out.exit_code == 0, out.output
    assert _edge("bench", bundle / "model_int8.tflite", "--runs", 3, "--json", bench).exit_code == 0

    result = _pipeline("parity", run_copy, "--device-results", predictions, "--device-results", bench)
    assert result.exit_code == 0, result.output
    report = json.loads((run_copy / "parity" / "report.json").read_text())
    assert report["device_timing"]["model"] == "model_int8" and "device time: measured" in result.output
    assert report["device_timing"]["predicted"] is None  # no `pipeline compile` yet: nothing predicted to put beside it
    assert "run `pipeline compile RUN --check-only` first" in result.output

    with_bundle = _pipeline("parity", run_copy, "--bundle", tmp_path / "b2", "--device-results", bench)
    assert with_bundle.exit_code == 1 and "--device-results apply to the comparison" in with_bundle.output

    twice = _pipeline("parity", run_copy, "--device-results", bench, "--device-results", bench)
    assert twice.exit_code == 1 and "got 2 files of timings (edge bench --json)" in twice.output
    assert "Traceback" not in twice.output

    other = json.loads(bench.read_text())
    other["model_sha256"] = "0" * 64
    (tmp_path / "other.json").write_text(json.dumps(other))
    before = (run_copy / "manifest.json").read_bytes()
    refused = _pipeline("parity", run_copy, "--device-results", tmp_path / "other.json")
    assert refused.exit_code == 1 and "not one of this run's (model_float, model_int8" in refused.output
    assert (run_copy / "manifest.json").read_bytes() == before
