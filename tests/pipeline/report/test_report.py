"""RUN/report.html in a real browser, TensorBoard's event files, and a quiet console.

The browser is Debian's Chromium (/usr/bin/chromium, `apt-get install chromium`; .ci/run installs
it) driven by Playwright's Python package, which downloads no browser of its own here. Each page is
checked from its DOM against the run's JSON files; screenshots are kept in the test's tmp folder
(paths printed; run pytest with -s to see them).
"""
from __future__ import annotations

import ctypes.util
import json
import os
import re
from pathlib import Path

import pytest

from tests.support.helpers import cli, quiet_env, tensorboard_has_graph, tensorboard_scalars
from tests.pipeline.test_compile import FULL, PARTIAL, double, reference_run  # noqa: F401  (double: the compiler double's fixture)

pytestmark = [pytest.mark.host, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
# Known to work here: no sandbox (root in a container), no GPU, and nothing that phones home.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
SMALL = ["--epochs", "2", "--image-size", "16"]
SECTIONS = ("run", "training", "quantization", "edgetpu", "parity", "latency")
# What TensorFlow and its libraries print when nobody hides it (seen with TF 2.21 on this machine).
NOISE = [
    re.compile(r"^[IWEF]\d{4} [\d:. ]+\d+ \S+:\d+\]"),  # absl/TF C++ log lines: I0000 00:00:1795... port.cc:153] ...
    re.compile(r"absl::InitializeLog"), re.compile(r"oneDNN"), re.compile(r"cuInit|cuda", re.I),
    re.compile(r"XNNPACK"), re.compile(r"fully_quantize"), re.compile(r"AutoGraph"),
    re.compile(r"WARNING:(tensorflow|absl)"), re.compile(r"\w+Warning:"),
]


def console_env() -> dict:
    """The environment of a user who set nothing: quiet_env without TF_CPP_MIN_LOG_LEVEL."""
    env = quiet_env()
    env.pop("TF_CPP_MIN_LOG_LEVEL")
    return env


def noise_in(stderr: str) -> list:
    return [line for line in stderr.splitlines() if any(p.search(line) for p in NOISE)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A whole `pipeline run` and a run that stopped after `pipeline train`, each a real subprocess
    started as a user would (no TF_CPP_MIN_LOG_LEVEL), and a latency file from `edge bench --json`."""
    from click.testing import CliRunner

    from edge.cli import main as edge_main

    root = tmp_path_factory.mktemp("report")
    full = cli(["run", "--out", str(root / "full"), *SMALL], env=console_env())
    parity = json.loads((root / "full" / "parity" / "report.json").read_text())
    # The gate may fail on a 2-epoch model; then, and only then, the exit code is 1.
    assert full.returncode == (0 if parity["gate"]["passed"] else 1), full.stderr[-3000:]
    bench = root / "bench.json"
    result = CliRunner().invoke(edge_main, ["bench", str(root / "full" / "model_int8.tflite"), "--runs", "5", "--json", str(bench)])
    assert result.exit_code == 0, result.output
    report = cli(["report", str(root / "full"), "--latency", str(bench)], env=console_env())
    assert report.returncode == 0, report.stderr
    trained = cli(["train", "--data", "digits", "--out", str(root / "trained"), *SMALL], env=console_env())
    assert trained.returncode == 0, trained.stderr[-3000:]
    return {"full": root / "full", "full_result": full, "report_result": report, "trained": root / "trained",
            "trained_result": trained, "bench": bench}


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (the test extra)")
    if ctypes.util.find_library("atomic") is None:  # the driver would die at start: "Connection closed"
        pytest.skip("needs libatomic.so.1 for Playwright's Node.js driver (apt-get install libatomic1; .ci/run installs it)")
    with sync_api.sync_playwright() as playwright:
        # Playwright gives every launch a fresh, temporary user-data-dir.
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


def open_page(browser, html: Path, screenshot: Path):
    """Load `html` as a file:// page; return (page, requests other than the page itself, console errors)."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(html.resolve().as_uri(), wait_until="load")
    page.screenshot(path=str(screenshot), full_page=True)
    print(f"\nscreenshot of {html}: {screenshot}")
    others = [url for url in requests if url != html.resolve().as_uri() and not url.startswith("data:")]
    return page, others, errors


def assert_self_contained(page, others, errors, images_expected=True):
    assert others == [], f"the page asked for {others}"
    assert errors == [], f"console errors (a blocked load shows here): {errors}"
    # Nothing that could load from elsewhere: every src is a data: URI, every link an anchor on the page.
    sources = page.eval_on_selector_all("[src]", "els => els.map(e => e.getAttribute('src'))")
    assert all(s.startswith("data:") for s in sources), [s[:60] for s in sources if not s.startswith("data:")]
    hrefs = page.eval_on_selector_all("[href]", "els => els.map(e => e.getAttribute('href'))")
    assert all(h.startswith("#") for h in hrefs), hrefs
    images = page.eval_on_selector_all("img", "els => els.map(e => [e.alt, e.complete, e.naturalWidth])")
    assert all(complete and width > 0 for _, complete, width in images), images
    assert bool(images) == images_expected, images


def text(page, key: str) -> str:
    return page.inner_text(f'[data-value="{key}"]').strip()


def not_run(page, section: str) -> bool:
    return page.locator(f"section#{section} .not-run").count() == 1


def test_full_run_report_in_a_browser(runs, browser, tmp_path):
    run = runs["full"]
    page, others, errors = open_page(browser, run / "report.html", tmp_path / "full_run.png")
    assert_self_contained(page, others, errors)
    for section in SECTIONS:
        assert page.locator(f"section#{section} h2").count() == 1, section
        assert not not_run(page, section) and page.locator(f"section#{section} .error").count() == 0, section

    manifest = json.loads((run / "manifest.json").read_text())
    assert text(page, "run.heldout_examples") == str(manifest["data"]["split"]["heldout_examples"])
    history = json.loads((run / "history.json").read_text())
    assert page.locator("section#training tr[data-epoch]").count() == len(history) == 2
    assert text(page, "training.heldout.accuracy") == f"{manifest['metrics']['heldout']['accuracy']:.4f}"

    quant = json.loads((run / "quantization.json").read_text())
    assert text(page, "quantization.float32_bytes") == f"{quant['sizes']['float32_bytes']:,}"
    assert text(page, "quantization.int8_bytes") == f"{quant['sizes']['int8_bytes']:,}"
    assert quant["sizes"]["int8_bytes"] == (run / "model_int8.tflite").stat().st_size
    assert text(page, "quantization.verification").startswith("passed")
    assert page.locator("section#quantization tr.worst-layer").count() == len(quant["worst_layers"])
    for name in quant["worst_layers"]:
        assert name in page.inner_text("section#quantization table.worst")

    pre = json.loads((run / "edgetpu.json").read_text())["preflight"]
    assert text(page, "edgetpu.ops_on_edgetpu") == str(pre["ops_on_edgetpu"])
    assert text(page, "edgetpu.total_ops") == str(pre["total_ops"])
    assert text(page, "edgetpu.ops_on_cpu") == str(pre["ops_on_cpu"])
    assert page.locator('[data-strip="preflight"] .op').count() == pre["total_ops"]
    assert page.locator('[data-strip="preflight"] .op.cpu').count() == pre["ops_on_cpu"]

    parity = json.loads((run / "parity" / "report.json").read_text())
    for name, m in parity["models"].items():
        assert text(page, f"parity.{name}.top1") == f"{m['top1']:.4f}", name
        assert text(page, f"parity.{name}.agreement") == f"{m['agreement']:.4f}", name
    assert text(page, "parity.gate").startswith("Gate passed" if parity["gate"]["passed"] else "Gate FAILED")
    assert page.locator("section#parity img.confusion").count() == len(parity["models"])
    assert page.locator("section#parity table.per-class tr").count() == len(parity["labels"]) + 1
    differing = parity["disagreements"]
    if differing["total"]:
        assert text(page, "parity.disagreements") == str(differing["total"])
    assert page.locator("section#parity figure.thumb img").count() == len(differing["kept"])

    bench = json.loads(runs["bench"].read_text())
    assert text(page, "latency.median_ms") == f"{bench['median_ms']:.3f}"
    assert "model_int8" in page.inner_text("section#latency")  # named as the run's model it measured, by sha256


def test_run_stopped_after_train_says_what_has_not_run(runs, browser, tmp_path):
    page, others, errors = open_page(browser, runs["trained"] / "report.html", tmp_path / "after_train.png")
    assert_self_contained(page, others, errors)
    assert not not_run(page, "run") and not not_run(page, "training")
    assert page.locator("section#training img.plot").count() == 1
    for section in ("quantization", "edgetpu", "parity", "latency"):
        assert not_run(page, section), section
        assert "has not run" in page.inner_text(f"section#{section} .not-run"), section
    assert [page.inner_text(f'[data-stage="{s}"]').endswith("not run") for s in ("train", "export", "compile", "parity")] == \
        [False, True, True, True]


def test_pipeline_run_prints_no_tensorflow_noise(runs):
    for name in ("full_result", "trained_result", "report_result"):
        assert noise_in(runs[name].stderr) == [], (name, runs[name].stderr[-3000:])
    out = runs["full_result"].stdout.strip().splitlines()
    assert out[-1].startswith("report ") and str(runs["full"] / "report.html") in out[-1]
    assert f"report: {runs['trained'] / 'report.html'}" in runs["trained_result"].stdout


def test_verbose_shows_what_quiet_hides(tmp_path):
    """`--verbose` leaves TensorFlow's start-up lines alone (the quiet runs above print none of them)."""
    from tests.support.helpers import write_class_folders

    folder = write_class_folders(tmp_path / "images", per_class=2)
    verbose = cli(["--verbose", "prepare", str(folder), "--out", str(tmp_path / "v")], env=console_env())
    assert verbose.returncode == 0, verbose.stderr
    assert noise_in(verbose.stderr), "TensorFlow 2.21 prints its start-up lines here; --verbose hid them:\n" + verbose.stderr


def test_quiet_unless_verbose_or_the_user_set_the_level(monkeypatch):
    import logging
    import sys

    from pipeline import console

    levels = {name: logging.getLogger(name).level for name in ("tensorflow", "absl", "h5py", "matplotlib")}
    monkeypatch.setattr(console, "_quiet", False)
    try:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")
        assert console.configure(verbose=False) is False and os.environ["TF_CPP_MIN_LOG_LEVEL"] == "1"
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL")
        assert console.configure(verbose=True) is False and "TF_CPP_MIN_LOG_LEVEL" not in os.environ
        assert console.configure(verbose=False) is True and os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"
        assert logging.getLogger("tensorflow").level == logging.ERROR
    finally:  # configure() changes process-wide state (pytest puts the warning filters back itself)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, console._QuietTensorFlow)]  # its import hook


def test_tensorboard_holds_one_scalar_per_epoch(runs):
    for run in (runs["full"], runs["trained"]):
        history = json.loads((run / "history.json").read_text())
        manifest = json.loads((run / "manifest.json").read_text())
        logs = run / manifest["training"]["tensorboard"]
        train, validation = tensorboard_scalars(logs / "train"), tensorboard_scalars(logs / "validation")
        steps = list(range(len(history)))  # Keras' epoch index
        for tag, key in (("epoch_loss", "loss"), ("epoch_accuracy", "accuracy"), ("epoch_lr", "lr")):
            assert sorted(train[tag]) == steps, tag
            assert [v for s in steps for v in train[tag][s]] == pytest.approx([e[key] for e in history], rel=1e-6), tag
        for tag, key in (("epoch_loss", "val_loss"), ("epoch_accuracy", "val_accuracy")):
            assert [v for s in steps for v in validation[tag][s]] == pytest.approx([e[key] for e in history], rel=1e-6), tag
        assert tensorboard_has_graph(logs / "train")


def test_no_tensorboard_writes_no_logs(tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["train", "--data", "digits", "--out", str(tmp_path / "run"), "--epochs", "1",
                                       "--image-size", "16", "--no-tensorboard"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "run" / "logs").exists()
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["training"]["tensorboard"] is None


def test_our_data_pipeline_causes_no_autograph_warning(tmp_path):
    """The cause, not the symptom: with TensorFlow's logger at WARNING, selecting examples by position
    (the held-out split, calibration) and the interleaved TFRecord feed log nothing from AutoGraph."""
    import logging

    from pipeline import data
    from tests.support.helpers import write_kaggle_tfrecords

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        for spec in ("digits", write_kaggle_tfrecords(tmp_path / "tfrec", per_class=4)):
            source = data.open_source(spec)
            split = data.Split()
            list(source.dataset(16, "heldout", split).take(2))
            list(source.training_dataset(16, source.indices("train", split)).take(2))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert [r.getMessage() for r in records if "AutoGraph" in r.getMessage()] == []


# --- the Edge TPU section with ops on the CPU: a real reference model and its real compiled twin ---


def test_edgetpu_strip_names_the_first_fallback_and_the_compiled_cpu_ops(tmp_path, browser, double):
    """The compiler double hands back Google's real compiled twin of the DeepLab reference model."""
    from click.testing import CliRunner

    from pipeline.cli import main

    run_dir = reference_run(tmp_path, PARTIAL)
    compiler, _ = double
    result = CliRunner().invoke(main, ["compile", str(run_dir), "--compiler", str(compiler)])
    assert result.exit_code == 0, result.output
    report = json.loads((run_dir / "edgetpu.json").read_text())
    pre, first = report["preflight"], report["preflight"]["first_fallback"]
    assert pre["ops_on_cpu"] > 0 and first is not None  # what makes this test worth running

    page, others, errors = open_page(browser, run_dir / "report.html", tmp_path / "edgetpu.png")
    assert_self_contained(page, others, errors, images_expected=False)  # no training, no parity: no plots
    assert page.locator('[data-strip="preflight"] .op.cpu').count() == pre["ops_on_cpu"]
    assert page.locator('[data-strip="preflight"] .op.tpu').count() == pre["ops_on_edgetpu"]
    firsts = page.eval_on_selector_all('[data-strip="preflight"] .op.first', "els => els.map(e => e.title)")
    assert firsts == [f"op {first['index']} {first['op']} v{first['version']}: {first['status']} — {first['reason']} — "
                      f"change: {first['advice']}"]
    headline = page.inner_text("section#edgetpu .first-fallback")
    assert f"{first['index']} {first['op']}" in headline and first["reason"] in headline and first["advice"] in headline
    # What to change: one row per entry of the pre-flight's advice, the first fallback's highlighted, each op covered once.
    rows = page.locator('section#edgetpu [data-table="advice"] tr[data-ops]')
    assert rows.count() == len(pre["advice"]) > 0
    covered = [int(i) for k in range(rows.count()) for i in rows.nth(k).get_attribute("data-ops").split(",")]
    assert sorted(covered) == [op["index"] for op in pre["ops"] if not op["on_edgetpu"]]
    highlighted = page.locator('section#edgetpu [data-table="advice"] tr.first')
    assert highlighted.count() == 1 and first["advice"] in highlighted.inner_text()
    compiled_cpu = page.eval_on_selector_all('[data-strip="compiled"] .op.cpu', "els => els.map(e => e.textContent)")
    assert compiled_cpu == [op for c in report["compiled"] for op in c["cpu_ops"]] and compiled_cpu
    assert not_run(page, "training") and not_run(page, "parity")  # this run holds a compiled model only


# --- failures: a report that cannot be rendered never fails a stage; bad input to `pipeline report` ---


def test_a_report_that_cannot_be_rendered_does_not_fail_the_stage(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import pipeline.report
    from pipeline.cli import main

    run_dir = reference_run(tmp_path, FULL)

    def broken(run_dir):
        raise RuntimeError("template exploded")

    monkeypatch.setattr(pipeline.report, "render", broken)
    result = CliRunner().invoke(main, ["compile", str(run_dir), "--check-only"])
    assert result.exit_code == 0, result.output
    assert "report.html not updated: RuntimeError: template exploded" in result.stderr
    assert (run_dir / "edgetpu.json").exists() and not (run_dir / "report.html").exists()
    again = CliRunner().invoke(main, ["report", str(run_dir)])
    assert again.exit_code == 1 and "template exploded" in again.stderr and "Traceback" not in again.output


@pytest.mark.parametrize("content, expected", [
    ("not json", "cannot read latency file"),
    ('{"schema_version": 1, "model": "m.tflite"}', "'model_sha256' is None"),
    ("[1, 2]", "holds a JSON list"),
])
def test_report_refuses_a_bad_latency_file(tmp_path, content, expected):
    from click.testing import CliRunner

    from pipeline.cli import main

    run_dir = reference_run(tmp_path, FULL)
    before = (run_dir / "manifest.json").read_bytes()
    bad = tmp_path / "bench.json"
    bad.write_text(content)
    result = CliRunner().invoke(main, ["report", str(run_dir), "--latency", str(bad)])
    assert result.exit_code == 1 and expected in result.stderr, result.output
    assert (run_dir / "manifest.json").read_bytes() == before and not (run_dir / "latency.json").exists()


def test_report_of_a_folder_that_is_not_a_run(tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import main

    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 1 and "is not a run directory" in result.stderr


def test_screenshot_for_the_readme(browser, session_folder, tmp_path):
    """The top of the report of the README's first command (`pipeline run`, defaults; its session run,
    tests/support/readme_run.py), photographed as the README shows it. By hand,
    `EDGEFLOW_DOCS_SCREENSHOT=docs/report.png pytest tests/pipeline/report/test_report.py -k readme` writes it there for the README."""
    from tests.support.readme_run import readme_run_once

    target = Path(os.environ.get("EDGEFLOW_DOCS_SCREENSHOT") or tmp_path / "report.png")
    run = readme_run_once(session_folder).run
    page, others, errors = open_page(browser, run / "report.html", tmp_path / "whole.png")
    assert_self_contained(page, others, errors)
    page.set_viewport_size({"width": 1100, "height": 1480})
    page.screenshot(path=str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(target.read_bytes()[16:20], "big") == 1100  # the PNG header's width: the viewport's
    print(f"README screenshot: {target}")
