"""`pipeline parity`'s client rows: the int8 model as edgeflow, pycoral and MediaPipe feed it, reported by default
and gated with --clients."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.host


def _pipeline(*args):
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def parity_run(exported_run, tmp_path_factory):
    """A copy of the tiny digits run with a default parity report (nothing gated but int8) and its bundle."""
    root = tmp_path_factory.mktemp("clients")
    run = root / "run"
    shutil.copytree(exported_run, run)
    result = _pipeline("parity", run, "--max-drop", "100", "--min-agreement", "0")
    assert result.exit_code == 0, result.output
    bundle = _pipeline("parity", run, "--bundle", root / "bundle")
    assert bundle.exit_code == 0, bundle.output
    return run, root / "bundle"


def _report(run):
    return json.loads((run / "parity" / "report.json").read_text())


def _answers_by_hand(run, bundle):
    """Each client's top-1 per bundle file, from edge.clients.feeds' feeds on a fresh interpreter of the int8 file:
    what a user's program would set as the input, scored without parity's code."""
    from edge.clients import feeds as clients
    from edge.answers.classify import get_scores
    from edge.pixels.contract import PixelContract
    from edge.model.interpreter import make_interpreter

    entries = json.loads((bundle / "bundle.json").read_text())["images"]
    files = [(bundle / e["file"]).read_bytes() for e in entries]
    contract = PixelContract.from_record(json.loads((run / "model_int8.tflite.json").read_text())["preprocessing"], "sidecar")
    interpreter = make_interpreter(run / "model_int8.tflite")
    details = interpreter.get_input_details()[0]
    feeds = {"edgeflow": lambda data: clients.edgeflow(data, details, contract),
             **{name: (lambda data, feed=feed: feed(data, details)) for name, feed in clients.CLASSIFIERS.items()}}
    answers = {}
    for name, feed in feeds.items():
        answers[name] = []
        for data in files:
            interpreter.set_tensor(details["index"], feed(data))
            interpreter.invoke()
            answers[name].append(int(np.argmax(get_scores(interpreter))))
    return answers, np.array([e["label"] for e in entries])


def test_every_client_has_a_row_equal_to_its_feed_through_the_interpreter(parity_run):
    run, bundle = parity_run
    report = _report(run)
    assert list(report["clients"]) == ["edgeflow", "pycoral", "mediapipe"]
    answers, labels = _answers_by_hand(run, bundle)
    for name, row in report["clients"].items():
        assert "refused" not in row, row
        assert row["gated"] is False
        assert row["images"] == len(labels)
        assert row["correct"] == int((np.asarray(answers[name]) == labels).sum()), name
        confusion = np.zeros_like(np.asarray(row["confusion"]))
        np.add.at(confusion, (labels, np.asarray(answers[name])), 1)
        assert (confusion == np.asarray(row["confusion"])).all(), name
    # edgeflow's own feed is the int8 row by another road: same answers image by image.
    assert report["clients"]["edgeflow"]["confusion"] == report["models"]["int8_cpu"]["confusion"]
    assert report["clients"]["edgeflow"]["agree"] == report["models"]["int8_cpu"]["agree"]


def test_client_rows_reach_the_manifest_the_markdown_and_the_page(parity_run):
    run, _ = parity_run
    report = _report(run)
    manifest = json.loads((run / "manifest.json").read_text())["parity"]["clients"]
    assert {n: c["top1"] for n, c in manifest.items()} == {n: c["top1"] for n, c in report["clients"].items()}
    md = (run / "parity" / "report.md").read_text()
    page = (run / "report.html").read_text()
    for name, c in report["clients"].items():
        assert f"| {name} | " in md and f"{c['top1']:.4f}" in md
        assert f'data-value="parity.client.{name}.top1">{c["top1"]:.4f}' in page


def _limit_between_int8_and_worst_client(report):
    """A --max-drop the int8 model meets and the worst client does not; asserts the run has such a client."""
    int8 = report["models"]["int8_cpu"]["drop_images"]
    name, worst = max(((n, c) for n, c in report["clients"].items() if n != "edgeflow"), key=lambda item: item[1]["drop_images"])
    assert worst["drop_images"] > int8, f"no client loses more than int8 on this run: {report['clients']}"
    return name, (int8 + worst["drop_images"]) / 2 * 100 / worst["images"]


def test_by_default_clients_are_reported_not_gated_and_the_worst_is_named(parity_run, tmp_path):
    run, _ = parity_run
    name, limit = _limit_between_int8_and_worst_client(_report(run))
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    result = _pipeline("parity", copy, "--max-drop", limit, "--min-agreement", "0")
    assert result.exit_code == 0, result.output
    assert f"worst client: {name}," in result.output and "not gated" in result.output
    assert _report(copy)["gate"]["applies_to"] == ["int8_cpu"]


def test_a_named_client_that_drops_more_than_the_limit_fails_the_gate(parity_run, tmp_path):
    run, _ = parity_run
    name, limit = _limit_between_int8_and_worst_client(_report(run))
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    result = _pipeline("parity", copy, "--max-drop", limit, "--min-agreement", "0", "--clients", f"{name},pycoral")
    assert result.exit_code == 1, result.output
    report = _report(copy)
    assert f"client_{name}: accuracy drop" in "; ".join(report["gate"]["failures"])
    assert "int8_cpu" not in "; ".join(report["gate"]["failures"])
    assert f"client_{name}" in report["gate"]["applies_to"] and report["clients"][name]["gated"] is True
    assert json.loads((copy / "manifest.json").read_text())["parity"]["passed"] is False


def test_pipeline_run_gates_a_named_client(parity_run, tmp_path):
    run, _ = parity_run
    name, limit = _limit_between_int8_and_worst_client(_report(run))
    copy = tmp_path / "run"
    shutil.copytree(run, copy)  # a trained run: `pipeline run` reuses it and runs export, compile, parity again
    result = _pipeline("run", "--out", copy, "--max-drop", limit, "--min-agreement", "0", "--clients", name)
    assert result.exit_code == 1, result.output
    assert f"client_{name}: accuracy drop" in result.output
    assert f"worst client: {name}," in result.output and f"(gated: {name})" in result.output


@pytest.mark.parametrize("command", ["parity", "run"])
def test_an_unknown_client_is_refused_in_one_line(parity_run, tmp_path, command):
    run, _ = parity_run
    args = ["parity", run] if command == "parity" else ["run", "--out", tmp_path / "new"]
    result = _pipeline(*args, "--clients", "pycoral,tensorflowjs")
    assert 0 < result.exit_code < 128
    assert "unknown client tensorflowjs" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "new").exists()


def test_a_client_that_cannot_feed_the_model_is_reported_and_fails_only_when_gated(exported_run, tmp_path):
    """An int8 input (--io-type int8): pycoral's classify_image.py and MediaPipe take uint8 only."""
    run = tmp_path / "run"
    shutil.copytree(exported_run, run)
    assert _pipeline("export", run, "--int8", "--io-type", "int8").exit_code == 0
    result = _pipeline("parity", run, "--max-drop", "100", "--min-agreement", "0")
    assert result.exit_code == 0, result.output
    clients = _report(run)["clients"]
    assert "refused" not in clients["edgeflow"]
    assert "pycoral's classify_image.py supports only uint8" in clients["pycoral"]["refused"]
    assert "takes only uint8 or float32" in clients["mediapipe"]["refused"]
    assert any(line.startswith("int8 as pycoral ") and "cannot feed the model" in line for line in result.output.splitlines())
    gated = _pipeline("parity", run, "--max-drop", "100", "--min-agreement", "0", "--clients", "pycoral")
    assert gated.exit_code == 1
    assert "client_pycoral: cannot feed the model" in gated.output


def test_the_worst_client_line_names_the_repair_when_a_client_loses_beyond_the_contract():
    from pipeline.inference.parity_report import CLIENT_GAP_PP, worst_client
    from pipeline.tasks.detect.drawn import DETECT_WORST

    def rows(mediapipe_drop):
        return {"edgeflow": {"top1": 0.95, "drop_pp": 0.5}, "pycoral": {"top1": 0.94, "drop_pp": 1.5},
                "mediapipe": {"top1": 0.95 - mediapipe_drop / 100, "drop_pp": mediapipe_drop}}

    far = worst_client(rows(0.5 + CLIENT_GAP_PP + 0.1))
    assert "worst client: mediapipe," in far and "--remedy --clients mediapipe" in far and "2.10 pp more" in far
    assert "run `pipeline parity RUN` again" in far  # a row from before the float model was fed alike: unsure why
    assert "--remedy" not in worst_client(rows(0.5 + CLIENT_GAP_PP))  # at the gap: the int8 model's own loss, nearly
    detect = {n: {"map50": r["top1"], "drop_pp": r["drop_pp"]} for n, r in rows(5.0).items()}
    assert "--remedy" not in worst_client(detect, DETECT_WORST)  # a detector's ladder cannot judge clients


def test_the_advice_tells_the_float_models_own_loss_under_a_feed_from_int8s():
    """From the row's float model fed as the client feeds: a loss the float model shares is the client's fit (training
    repairs it, no export does); a loss int8 adds against float fed alike is the remedy ladder's with the client judged."""
    from pipeline.inference.parity_report import CLIENT_GAP_PP, worst_client

    def rows(float_drop, int8_drop):
        mediapipe = {"top1": 0.95 - (float_drop + int8_drop) / 100, "drop_pp": float_drop + int8_drop,
                     "float_fed_alike": {"top1": 0.95 - float_drop / 100, "float_drop_pp": float_drop,
                                         "int8_drop_pp": int8_drop, "agreement": 0.9}}
        return {"edgeflow": {"top1": 0.95, "drop_pp": 0.0}, "mediapipe": mediapipe}

    int8s = worst_client(rows(1.0, 4.0))  # the pycoral-like case: float holds, int8 parts under the feed
    assert "--remedy --clients mediapipe" in int8s and "--client-fits" not in int8s and "int8 loses 4.00 pp" in int8s
    floats = worst_client(rows(5.7, 0.5))  # the MediaPipe case: float itself loses as the client feeds
    assert "--client-fits" in floats and "--remedy" not in floats and "float model itself loses 5.70 pp" in floats
    both = worst_client(rows(5.0, CLIENT_GAP_PP + 1))  # both: training first, then the remedy for what int8 adds
    assert both.index("--client-fits") < both.index("--remedy --clients mediapipe")
    # Two parts each within the gap, together over it (small CNN, 16 px photo crops, --client-fits: float 1.75 pp,
    # int8 1.25 pp): the ladder kept the export as asked and the gap stayed (bench/results/clients.md), so no command.
    split = worst_client(rows(1.75, 1.25))
    assert "3.00 pp more than the int8 model" in split and "each within 2 pp" in split and "`" not in split, split
    better = worst_client(rows(-1.0, 3.5))  # the float model does better under the feed: said so, not "loses -1.00"
    assert "itself gains 1.00 pp" in better and "--remedy --clients mediapipe" in better, better


def test_each_client_row_holds_the_float_model_fed_alike(parity_run):
    """parity feeds the float model each client's own pixels: edgeflow's feed is the contract, so its float top-1 is
    the reference's; each row's parts add up to the row's drop."""
    run, _ = parity_run
    report = _report(run)
    float_top1 = report["models"]["float_savedmodel"]["top1"]
    for name, row in report["clients"].items():
        if "refused" in row:
            continue
        alike = row["float_fed_alike"]
        assert abs(alike["float_drop_pp"] + alike["int8_drop_pp"] - row["drop_pp"]) < 1e-6, (name, row)
        assert abs(alike["top1"] - (float_top1 - alike["float_drop_pp"] / 100)) < 1e-9
    assert report["clients"]["edgeflow"]["float_fed_alike"]["float_drop_pp"] == 0.0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["parity"]["clients"]["mediapipe"]["float_fed_alike"] == report["clients"]["mediapipe"]["float_fed_alike"]


def test_a_run_trained_with_the_client_fits_is_not_told_to_train_with_them():
    """When training already fitted images as the client does, `--client-fits` again would repeat the run: the advice
    says so instead of naming it (the session's digits run at 16 px, 4 epochs, is such a case: MediaPipe's float
    loss 4.2 pp with the fits)."""
    from pipeline.inference.parity_report import worst_client

    def rows(trained):
        mediapipe = {"top1": 0.89, "drop_pp": 6.2,
                     "float_fed_alike": {"top1": 0.893, "float_drop_pp": 5.7, "int8_drop_pp": 0.5, "agreement": 0.9,
                                         "trained_with_client_fits": trained}}
        return {"edgeflow": {"top1": 0.95, "drop_pp": 0.0}, "mediapipe": mediapipe}

    assert "`pipeline train ... --client-fits`" in worst_client(rows(False))
    assert "`pipeline train ... --client-fits`" in worst_client(rows(None))  # a run from before the fits were recorded
    trained = worst_client(rows(True))
    assert "`pipeline train" not in trained and "though training fitted images as mediapipe does" in trained
    assert "float model itself loses 5.70 pp" in trained and "--remedy" not in trained


def test_each_client_row_says_whether_training_fitted_as_the_clients_do(parity_run):
    from pipeline.inference.parity_report import worst_client

    run, _ = parity_run
    report = _report(run)
    trained = json.loads((run / "manifest.json").read_text())["training"]["feed"]["client_fits"]["on"]
    for name, row in report["clients"].items():
        assert row["float_fed_alike"]["trained_with_client_fits"] is trained, name
    assert "`pipeline train ... --client-fits`" not in worst_client(report["clients"]) or not trained
