"""The `edge` command line through click's CliRunner: classify, evaluate, bench, and its errors."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from edge.documents.bundle import SCHEMA_VERSION as BUNDLE_SCHEMA
from edge.model.integrity import sha256_bytes, write_sidecar
from edge.pixels.contract import PixelContract
from tests.support.edge_paths import EDGETPU, IMAGES, LABELS, run_edge


_run = run_edge


def _no_traceback(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output + result.stderr


def test_classify_uses_sidecar_labels(int8_copy: Path):
    write_sidecar(int8_copy, labels=LABELS, preprocessing=PixelContract().as_record())
    result = _run("classify", int8_copy, IMAGES / "red.png", IMAGES / "blue.png", "--top-k", "2")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("red.png:") and lines[1].split()[1] == "red"
    assert lines[3].endswith("blue.png:") and lines[4].split()[1] == "blue"
    assert len(lines) == 6


def test_classify_labels_file_and_class_ids(int8_copy: Path, tmp_path: Path):
    labels = tmp_path / "labels.txt"
    labels.write_text("R\nG\nB\n")
    # No sidecar, no manifest, no metadata: the user says how pixels map (this model takes raw pixels).
    raw = ("--input-mean", "0", "--input-std", "1")
    result = _run("classify", int8_copy, IMAGES / "green.png", "--labels", labels, "--top-k", "1", *raw)
    assert result.exit_code == 0 and "  G  (id 1)" in result.stdout
    assert "sha256 is not checked" in result.stderr
    assert "input: mean 0, std 1 (--input-mean/--input-std)" in result.stderr
    result = _run("classify", int8_copy, IMAGES / "green.png", "--top-k", "1", "--threads", "1", *raw)
    assert result.exit_code == 0 and "  1  (id 1)" in result.stdout
    assert "labels: none found" in result.stderr


def test_a_model_with_no_record_gets_pycorals_default_normalization_and_says_so(int8_copy: Path):
    result = _run("classify", int8_copy, IMAGES / "green.png")
    assert result.exit_code == 0
    assert "mean 128, std 128 (pycoral's default" in result.stderr and "normalized, then quantized to uint8" in result.stderr


def test_input_mean_is_refused_where_the_model_records_its_contract(int8_copy: Path):
    write_sidecar(int8_copy, labels=LABELS, preprocessing=PixelContract().as_record())
    result = _run("classify", int8_copy, IMAGES / "green.png", "--input-mean", "128")
    assert result.exit_code == 1 and "--input-mean/--input-std do not apply" in result.stderr
    _no_traceback(result)


def test_a_sidecar_without_a_pixel_contract_is_refused(int8_copy: Path):
    write_sidecar(int8_copy, labels=LABELS)
    result = _run("classify", int8_copy, IMAGES / "green.png")
    assert result.exit_code == 1 and "records no pixel contract" in result.stderr
    _no_traceback(result)


def test_a_contract_this_device_cannot_honour_is_refused(int8_copy: Path):
    write_sidecar(int8_copy, labels=LABELS, preprocessing=dict(PixelContract().as_record(), resize="bicubic"))
    result = _run("classify", int8_copy, IMAGES / "green.png")
    assert result.exit_code == 1 and "resize 'bicubic', expected 'bilinear_antialias'" in result.stderr


def test_tampered_model_is_refused_unless_no_verify(int8_copy: Path):
    write_sidecar(int8_copy, labels=LABELS, preprocessing=PixelContract().as_record())
    data = bytearray(int8_copy.read_bytes())
    data[-1] ^= 0xFF
    int8_copy.write_bytes(bytes(data))
    result = _run("classify", int8_copy, IMAGES / "red.png")
    assert result.exit_code == 1 and "error:" in result.stderr and "sidecar" in result.stderr
    _no_traceback(result)
    result = _run("classify", int8_copy, IMAGES / "red.png", "--no-verify")
    assert result.exit_code == 0 and "WARNING: --no-verify" in result.stderr


def test_compiled_model_without_edgetpu_exits_2(tmp_path: Path):
    model = tmp_path / "model_edgetpu.tflite"
    shutil.copy(EDGETPU, model)
    result = _run("classify", model, IMAGES / "red.png", "--no-verify")
    assert result.exit_code == 2 and "libedgetpu1-std" in result.stderr
    _no_traceback(result)


def test_bad_inputs_exit_1_without_traceback(int8_copy: Path, tmp_path: Path):
    truncated = tmp_path / "cut.tflite"
    truncated.write_bytes(int8_copy.read_bytes()[:1000])
    for args in (
        ("classify", truncated, IMAGES / "red.png"),
        ("classify", tmp_path / "missing.tflite", IMAGES / "red.png"),
        ("classify", int8_copy, tmp_path / "missing.png"),
        ("classify", int8_copy, IMAGES / "red.png", "--edgetpu"),
        ("bench", truncated),
    ):
        result = _run(*args)
        assert result.exit_code == 1, (args, result.output, result.stderr)
        assert result.stderr.startswith("error: ") or "\nerror: " in result.stderr
        _no_traceback(result)


def _bundle(root: Path) -> Path:
    bundle = root / "bundle"
    (bundle / "heldout").mkdir(parents=True)
    images = []
    for i, name in enumerate(LABELS):
        shutil.copy(IMAGES / f"{name}.png", bundle / "heldout" / f"{i:05d}.png")
        images.append({"file": f"heldout/{i:05d}.png", "label": i})
    images.append({"file": "heldout/00000.png", "label": None})
    (bundle / "bundle.json").write_text(json.dumps({"schema_version": BUNDLE_SCHEMA, "labels": LABELS, "images": images}))
    return bundle


def test_evaluate_on_a_bundle_writes_predictions(int8_copy: Path, tmp_path: Path):
    out = tmp_path / "out" / "predictions.json"
    result = _run("evaluate", int8_copy, "--data", _bundle(tmp_path), "--out", out, "--top-k", "2",
                  "--input-mean", "0", "--input-std", "1")
    assert result.exit_code == 0, result.stderr
    got = json.loads(out.read_text())
    assert got["schema_version"] == 1 and got["model"] == "model_int8.tflite"
    assert got["model_sha256"] == sha256_bytes(int8_copy.read_bytes())
    assert got["backend"] in ("tflite_runtime", "ai_edge_litert", "tensorflow.lite") and got["edgetpu"] is False
    assert got["labels"] == LABELS and got["top1_accuracy"] == 1.0
    assert [p["file"] for p in got["predictions"]] == ["heldout/00000.png", "heldout/00001.png", "heldout/00002.png", "heldout/00000.png"]
    assert got["predictions"][3]["label"] is None
    assert all(len(p["scores"]) == 3 and all(isinstance(s, float) for s in p["scores"]) for p in got["predictions"])
    assert sorted(p.name for p in out.parent.iterdir()) == ["predictions.json"]  # no temporary left behind


def test_evaluate_on_class_folders(int8_copy: Path, tmp_path: Path):
    data = tmp_path / "folders"
    for name in LABELS:
        (data / name).mkdir(parents=True)
        shutil.copy(IMAGES / f"{name}.png", data / name / "a.png")
    (data / "notes.txt").write_text("ignored")
    out = tmp_path / "p.json"
    # Sorted folder names are blue, green, red: the labels decide the class order instead.
    write_sidecar(int8_copy, labels=LABELS, preprocessing=PixelContract().as_record())
    result = _run("evaluate", int8_copy, "--data", data, "--out", out)
    assert result.exit_code == 0, result.stderr
    got = json.loads(out.read_text())
    assert got["labels"] == LABELS and got["top1_accuracy"] == 1.0
    assert {p["file"]: p["label"] for p in got["predictions"]} == {"red/a.png": 0, "green/a.png": 1, "blue/a.png": 2}


def test_evaluate_refuses_bundle_labels_that_differ_from_the_model(int8_copy: Path, tmp_path: Path):
    write_sidecar(int8_copy, labels=["blue", "green", "red"], preprocessing=PixelContract().as_record())
    result = _run("evaluate", int8_copy, "--data", _bundle(tmp_path), "--out", tmp_path / "p.json")
    assert result.exit_code == 1 and "differ from the model's labels" in result.stderr
    assert not (tmp_path / "p.json").exists()


def test_bench_reports_first_invoke_and_steady_state(int8_copy: Path):
    result = _run("bench", int8_copy, "--runs", "5", "--threads", "1")
    assert result.exit_code == 0, result.stderr
    assert "first invoke (load + first run):" in result.stdout
    assert "steady state over 5 runs: median" in result.stdout and "p90" in result.stdout


def test_bench_json_holds_what_it_printed(int8_copy: Path, tmp_path: Path):
    out = tmp_path / "bench.json"
    result = _run("bench", int8_copy, "--runs", "4", "--json", out)
    assert result.exit_code == 0, result.stderr
    bench = json.loads(out.read_text())  # what `pipeline report RUN --latency FILE` reads
    assert bench["model_sha256"] == sha256_bytes(int8_copy.read_bytes()) and bench["model"] == int8_copy.name
    assert bench["runs"] == 4 and bench["end_to_end_images_per_s"] is None
    assert f"median {bench['median_ms']:.3f} ms, p90 {bench['p90_ms']:.3f} ms" in result.stdout
    assert result.stdout.splitlines()[0].split()[3] == bench["backend"]


def test_bench_edgetpu_flag_on_compiled_model_exits_2(tmp_path: Path):
    model = tmp_path / "m_edgetpu.tflite"
    shutil.copy(EDGETPU, model)
    result = _run("bench", model, "--edgetpu", "--no-verify")
    assert result.exit_code == 2 and "Edge TPU" in result.stderr


@pytest.mark.edgetpu
def test_classify_on_a_real_edgetpu(tmp_path: Path):  # pragma: no cover - needs hardware
    # The lookalike fixture is no real compiler output; a real compiled model must be supplied.
    model = os.environ.get("EDGE_TEST_EDGETPU_MODEL")
    if not model:
        pytest.skip("set EDGE_TEST_EDGETPU_MODEL to a model compiled by edgetpu_compiler")
    result = _run("bench", model, "--edgetpu", "--no-verify", "--runs", "3")
    assert result.exit_code == 0, result.stderr
    assert "edgetpu True" in result.stdout


def test_bench_with_images_reports_end_to_end_rate_against_bare_invokes(int8_copy: Path, tmp_path: Path):
    folder = tmp_path / "photos"
    (folder / "sub").mkdir(parents=True)
    for name in LABELS:
        shutil.copy(IMAGES / f"{name}.png", folder / "sub" / f"{name}.png")
    (folder / "notes.txt").write_text("not an image")
    result = _run("bench", int8_copy, "--runs", "3", "--images", folder)
    assert result.exit_code == 0, result.stderr
    assert "invokes/s)" in result.stdout
    line = next(x for x in result.stdout.splitlines() if x.startswith("end to end over 3 images"))
    assert "images/s" in line and "of the bare invoke rate" in line
    assert result.stdout.splitlines()[0].split()[3] in ("tflite_runtime", "ai_edge_litert", "tensorflow.lite")  # named


def test_bench_images_that_are_not_a_folder_is_refused(int8_copy: Path, tmp_path: Path):
    result = _run("bench", int8_copy, "--images", tmp_path / "none")
    assert result.exit_code == 1 and "--images" in result.stderr and "is not a directory" in result.stderr
    _no_traceback(result)



def test_the_recorded_contract_version_decides_the_jpeg_decode(int8_copy: Path, tmp_path: Path):
    from PIL import Image

    photo = tmp_path / "red.jpg"
    Image.open(IMAGES / "red.png").convert("RGB").resize((64, 48)).save(photo)
    write_sidecar(int8_copy, labels=LABELS, preprocessing=PixelContract().as_record())
    result = _run("classify", int8_copy, photo)
    assert result.exit_code == 0 and "decode: JPEGs at reduced scale (the recorded pixel contract)" in result.stderr
    v1 = {k: v for k, v in PixelContract().as_record().items() if k != "jpeg_scale"}
    write_sidecar(int8_copy, labels=LABELS, preprocessing=dict(v1, version=1))
    result = _run("classify", int8_copy, photo)
    assert result.exit_code == 0 and "decode: JPEGs at full size (pixel contract version 1)" in result.stderr
