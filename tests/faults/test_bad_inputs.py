"""Bad input across the command lines, each run as a real subprocess: a clear message naming the problem,
an exit code in 1..127, no traceback, no manifest from a failed train, and an existing run left byte for
byte as it was after a failed later stage.

One tiny exported run (conftest's `exported_run`) serves every later-stage case, each on its own copy.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.errors import DataError
from tests.support.helpers import REPO, cli, quiet_env, tree_snapshot

pytestmark = pytest.mark.host

FIXTURES = REPO / "tests" / "fixtures"


def edge_cli(args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=60, env=quiet_env(), cwd=REPO)


def assert_refused(result: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit code 1..127, no traceback, and every needle in stderr."""
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-1500:]}\nstderr:\n{result.stderr[-3000:]}"
    assert 1 <= result.returncode <= 127, shown
    assert "Traceback" not in result.stderr, shown
    for needle in needles:
        assert needle in result.stderr, f"{needle!r} not in stderr\n{shown}"


# --- pipeline train: refused before anything is trained or written ---------------------------------

def _config(tmp_path, **values) -> Path:
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": "digits", **values}))
    return path


def _junk(tmp_path, name, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


TRAIN_CASES = {
    "alpha on small_cnn": (lambda t: ["--alpha", "0.5"], ["model small_cnn does not take option 'alpha'; it takes width, dropout"]),
    "misspelled model option in a config": (
        lambda t: ["--config", _config(t, model="mobilenet_v2", image_size=32, model_options={"alhpa": 0.35})],
        ["model mobilenet_v2 does not take option 'alhpa'; it takes alpha, dropout"]),
    "minimalistic neither 0 nor 1": (
        lambda t: ["--config", _config(t, model="mobilenet_v3_small", image_size=32, model_options={"minimalistic": 2})],
        ["model option minimalistic=2 for mobilenet_v3_small, expected 0 or 1"]),
    "random bytes as weights": (
        lambda t: ["--weights", _junk(t, "w.h5", np.random.default_rng(0).bytes(4096))],
        ["w.h5 is not an HDF5 file", "expected Keras weights"]),
    "a text file as weights": (
        lambda t: ["--weights", _junk(t, "weights.h5", b"these are not weights\n")],
        ["weights.h5 is not an HDF5 file"]),
    "missing weights file": (lambda t: ["--weights", t / "nowhere.h5"], ["nowhere.h5 not found"]),
    "config value of the wrong type": (lambda t: ["--config", _config(t, epochs="ten")], ["epochs 'ten', expected a whole number"]),
    "config that is not JSON": (lambda t: ["--config", _junk(t, "c.json", b"{epochs: 3")], ["cannot read config", "c.json"]),
    "config holding a list": (lambda t: ["--config", _junk(t, "c.json", b"[1, 2]")], ["holds a JSON list; expected a JSON object"]),
    "config with an unknown key": (lambda t: ["--config", _config(t, epoch=3)], ["unknown keys ['epoch']"]),
    "zero epochs": (lambda t: ["--epochs", "0"], ["epochs 0, expected at least 1"]),
    "image too small for the model": (lambda t: ["--image-size", "4"], ["image size 4 is too small for small_cnn; expected at least 8"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(TRAIN_CASES))
def test_train_refuses(case, tmp_path, existing_run_dir):
    args, needles = TRAIN_CASES[case]
    extra = [str(a) for a in args(tmp_path)]
    # A config file brings its own data and epochs; otherwise one epoch, so a case that is not refused fails fast.
    fill = [] if "--config" in extra else ["--data", "digits"] + ([] if "--epochs" in extra else ["--epochs", "1"])
    result = cli(["train", *fill, "--out", str(existing_run_dir), *extra])
    assert_refused(result, *needles)
    assert tree_snapshot(existing_run_dir) == {"notes.txt": b"keep me"}  # no manifest, no state, nothing else


@pytest.mark.slow
def test_train_into_a_new_folder_leaves_no_folder(tmp_path):
    result = cli(["train", "--data", "digits", "--out", str(tmp_path / "new"), "--alpha", "0.5"])
    assert_refused(result, "does not take option 'alpha'")
    assert not (tmp_path / "new").exists()


# --- pipeline train --task detect: bad detection data named by file and line or annotation id ------

def _png(height: int = 40, width: int = 60) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.zeros((height, width, 3), np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _coco(tmp_path, images=None, annotations=None, image_bytes=None) -> Path:
    """annotations.json with one 60x40 image (images/a.png) holding one 'cat'; parts replaced as given."""
    (tmp_path / "images").mkdir(exist_ok=True)
    (tmp_path / "images" / "a.png").write_bytes(_png() if image_bytes is None else image_bytes)
    doc = {"images": images or [{"id": 1, "file_name": "images/a.png", "width": 60, "height": 40}],
           "annotations": annotations or [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 5, 20, 10]}],
           "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}]}
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(doc))
    return path


def _yolo(tmp_path, line: str) -> Path:
    for folder in ("images", "labels"):
        (tmp_path / folder).mkdir()
    (tmp_path / "images" / "a.png").write_bytes(_png())
    (tmp_path / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n" + line + "\n")
    (tmp_path / "data.yaml").write_text("names: [cat, dog]\n")
    return tmp_path / "data.yaml"


def _annotation(**changed) -> list:
    return [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [10, 5, 20, 10], **changed}]


DETECT_DATA_CASES = {  # name -> (data spec written under tmp_path, what the error must say)
    "COCO box outside the image": (lambda t: _coco(t, annotations=_annotation(bbox=[50, 5, 20, 10])),
                                   ["annotations.json: annotation 7 (image 1): box", "lies outside the image"]),
    "COCO box of zero size": (lambda t: _coco(t, annotations=_annotation(bbox=[10, 5, 0, 10])),
                              ["annotation 7 (image 1)", "has zero or negative size"]),
    "COCO unknown category id": (lambda t: _coco(t, annotations=_annotation(category_id=9)),
                                 ["annotation 7 has unknown category_id 9; expected one of [1, 2]"]),
    "COCO annotation of a missing image": (lambda t: _coco(t, annotations=_annotation(image_id=5)),
                                           ["annotation 7 refers to image 5, which is not in 'images'"]),
    "COCO duplicate image ids": (lambda t: _coco(t, images=[{"id": 1, "file_name": "images/a.png", "width": 60, "height": 40}] * 2),
                                 ["annotations.json: image id 1 appears twice"]),
    "COCO empty image file": (lambda t: _coco(t, image_bytes=b""), ["a.png", "the image is empty (0 bytes)"]),
    "COCO unreadable image file": (lambda t: _coco(t, image_bytes=b"not an image"), ["a.png", "the image cannot be decoded"]),
    "YOLO line with 4 fields": (lambda t: _yolo(t, "1 0.5 0.5 0.2"),
                                ["a.txt, line 2: 4 fields ('1 0.5 0.5 0.2'); expected 5: class cx cy w h"]),
    "YOLO unknown class": (lambda t: _yolo(t, "2 0.5 0.5 0.2 0.2"), ["a.txt, line 2: unknown class 2; expected a class index 0..1"]),
    "a folder instead of a detection spec": (lambda t: t, ["is a folder; expected its annotations.json (COCO), data.yaml (YOLO)"]),
    # issue 39: COCO read too loosely
    "COCO booleans as coordinates": (lambda t: _coco(t, annotations=_annotation(bbox=[True, 5, 20, 10])),
                                     ["annotation 7 has bbox [True, 5, 20, 10]; expected [x, y, width, height] in pixels"]),
    "COCO absolute file_name": (lambda t: _coco(t, images=[{"id": 1, "file_name": str(t / "images" / "a.png"), "width": 60,
                                                            "height": 40}]), ["image 1 has file_name", "without '..'"]),
    "COCO ../ file_name": (lambda t: _coco(t, images=[{"id": 1, "file_name": "../data/images/a.png", "width": 60, "height": 40}]),
                           ["image 1 has file_name '../data/images/a.png'; expected a path relative"]),
    "COCO one file under two ids": (lambda t: _coco(t, images=[{"id": 1, "file_name": "images/a.png", "width": 60, "height": 40},
                                                               {"id": 2, "file_name": "images/a.png", "width": 60, "height": 40}]),
                                    ["images 1 and 2 are both 'images/a.png'; expected each file under one image id"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(DETECT_DATA_CASES))
def test_train_detect_refuses_bad_data(case, tmp_path):
    make, needles = DETECT_DATA_CASES[case]
    data = tmp_path / "data"
    data.mkdir()
    result = cli(["train", "--task", "detect", "--data", str(make(data)), "--epochs", "1", "--out", str(tmp_path / "run")])
    assert_refused(result, *needles)
    assert result.returncode == DataError.exit_code, result.stderr[-500:]  # as for classification data
    assert not (tmp_path / "run").exists()


def _images_in_two_folders(tmp_path) -> list:
    """images/a.png beside the JSON and another, different images/a.png under other/: which one is meant?"""
    spec = _coco(tmp_path)
    (tmp_path / "other" / "images").mkdir(parents=True)
    (tmp_path / "other" / "images" / "a.png").write_bytes(_png(40, 61))
    return ["train", "--task", "detect", "--data", spec, "--images", tmp_path / "other"]


IMAGES_CASES = {  # name -> (the command, given tmp_path, whose data is written there; what the error must say)
    "--images that is a file": (lambda t: ["train", "--task", "detect", "--data", _coco(t), "--images", t / "annotations.json"],
                                ["annotations.json is not a folder; expected a local folder holding the images"]),
    "--images that does not exist": (lambda t: ["train", "--task", "detect", "--data", _coco(t), "--images", t / "nowhere"],
                                     ["--images", "nowhere does not exist; expected a local folder"]),
    "--images with YOLO data": (lambda t: ["train", "--task", "detect", "--data", _yolo(t, "0 0.5 0.5 0.1 0.1"), "--images", t],
                                ["data.yaml' is not COCO; expected --data or --val-data PATH/annotations.json, or no --images"]),
    "--images with --task classify": (lambda t: ["train", "--data", "digits", "--images", t],
                                      ["folders of a detector's COCO images (--task detect)", "expected no --images"]),
    "--images in a config file as one string": (
        lambda t: ["train", "--task", "detect", "--config", _config(t, data=str(_coco(t)), images=str(t))],
        ["images '", "expected a list of one or more folders"]),
    "a file_name in two folders, different files": (
        _images_in_two_folders, ["file 'images/a.png' is in both", "other/images/a.png, and they differ; expected one file per file_name"]),
    "prepare --task detect --images that is a file": (
        lambda t: ["prepare", "--task", "detect", _coco(t), "--images", t / "annotations.json"], ["annotations.json is not a folder"]),
    "prepare of class folders with --images": (lambda t: ["prepare", t, "--images", t], ["expected no --images"]),
    "run --task detect on shapes with --images": (lambda t: ["run", "--task", "detect", "--images", t],
                                                  ["'shapes' is not COCO; expected --data or --val-data PATH/annotations.json"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(IMAGES_CASES))
def test_images_folders_are_refused_when_they_cannot_be_meant(case, tmp_path):
    make, needles = IMAGES_CASES[case]
    data = tmp_path / "data"
    data.mkdir()
    args = [str(a) for a in make(data)]
    out = tmp_path / "out"
    result = cli([*args, "--out", str(out), *(["--epochs", "1"] if args[0] == "train" else [])])
    assert_refused(result, *needles)
    assert not out.exists()


# --- later stages on an existing run: refused, and the run byte for byte unchanged ----------------

EXPORT_CASES = {
    "two modes": (["--int8", "--float16"], ["got --int8 and --float16; expected at most one mode"]),
    "int8 option without --int8": (["--per-tensor"], ["--per-tensor apply to --int8 only"]),
    "no calibration samples": (["--int8", "--calibration-samples", "0"], ["--calibration-samples 0, expected at least 1"]),
    "negative QAT epochs": (["--int8", "--qat-epochs", "-1"], ["--qat-epochs -1, expected 0 or more"]),
    "clients without --remedy": (["--int8", "--clients", "mediapipe"], ["--clients mediapipe applies with --remedy"]),
    "unknown client": (["--int8", "--remedy", "--clients", "tflite"], ["--clients 'tflite': unknown client tflite"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(EXPORT_CASES))
def test_export_refuses_bad_options(case, exported_copy):
    args, needles = EXPORT_CASES[case]
    before = tree_snapshot(exported_copy)
    assert_refused(cli(["export", str(exported_copy), *args]), *needles)
    assert tree_snapshot(exported_copy) == before


def test_export_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "empty").mkdir()
    assert_refused(cli(["export", str(tmp_path / "empty"), "--int8"]), "not a run directory")
    assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.slow
def test_export_refuses_calibration_data_that_is_not_npy(exported_copy, tmp_path):
    before = tree_snapshot(exported_copy)
    junk = _junk(tmp_path, "calib.npy", b"not an array\n")
    assert_refused(cli(["export", str(exported_copy), "--int8", "--calibration-data", str(junk)]), "calib.npy is not a .npy array")
    assert tree_snapshot(exported_copy) == before


@pytest.mark.slow
def test_qat_refuses_a_manifest_without_the_global_batch(exported_copy):
    manifest = json.loads((exported_copy / "manifest.json").read_text())
    del manifest["training"]["global_batch"]
    (exported_copy / "manifest.json").write_text(json.dumps(manifest))
    before = tree_snapshot(exported_copy)
    result = cli(["export", str(exported_copy), "--int8", "--qat-epochs", "1", "--calibration-samples", "10"])
    assert_refused(result, "training.global_batch None", "expected the positive global batch")
    assert tree_snapshot(exported_copy) == before


@pytest.mark.slow
@pytest.mark.parametrize("args, needles", [
    (["--model", "mobilenet_v2"], ["--model mobilenet_v2 (the run has small_cnn)", "choose a new --out"]),
    (["--epochs", "7", "--image-size", "32"], ["--image-size 32 (the run has 16)", "--epochs 7 (the run has 4)"]),
    (["--images", "photos", "--images", "more"], ["--images photos more (the run has none)"]),
], ids=["other model", "other size and epochs", "images folders"])
def test_run_refuses_a_trained_run_that_differs_from_what_was_asked(exported_copy, args, needles):
    before = tree_snapshot(exported_copy)
    assert_refused(cli(["run", "--out", str(exported_copy), *args]), *needles)
    assert tree_snapshot(exported_copy) == before


# --- edge bench: bad models and options ------------------------------------------------------------

def test_bench_missing_model(tmp_path):
    assert_refused(edge_cli(["bench", tmp_path / "none.tflite"]), "none.tflite not found, expected a .tflite file")


def test_bench_text_file(tmp_path):
    path = _junk(tmp_path, "notes.tflite", b"a text file with a model's name, long enough to read\n")
    assert_refused(edge_cli(["bench", path]), "notes.tflite is damaged or not a valid .tflite", "expected b'TFL3'")


def test_bench_truncated_model(exported_copy, tmp_path):
    path = _junk(tmp_path, "cut.tflite", (exported_copy / "model_int8.tflite").read_bytes()[:1000])
    assert_refused(edge_cli(["bench", path]), "cut.tflite is damaged")


def test_bench_model_changed_after_it_was_recorded(exported_copy):
    model = exported_copy / "model_int8.tflite"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(bytes(data))
    assert_refused(edge_cli(["bench", model]), "this is not the model that was recorded")


@pytest.mark.parametrize("option", ["--threads", "--runs"])
def test_bench_zero_of_a_count(exported_copy, option):
    result = edge_cli(["bench", exported_copy / "model_int8.tflite", option, "0"])
    assert_refused(result, f"Invalid value for '{option}'")


def test_bench_edgetpu_on_an_uncompiled_model(exported_copy):
    assert_refused(edge_cli(["bench", exported_copy / "model_int8.tflite", "--edgetpu"]), "is not compiled for the Edge TPU")


def test_bench_compiled_model_without_an_edge_tpu():
    result = edge_cli(["bench", FIXTURES / "tiny_edgetpu.tflite", "--no-verify"])
    assert_refused(result, "needs the Edge TPU", "libedgetpu1-std")
    assert result.returncode == 2  # the asked-for hardware is missing, not bad input


# --- pipeline compile and parity: refused, the run unchanged --------------------------------------

def test_compile_check_only_on_a_file_that_is_not_a_model(tmp_path):
    path = _junk(tmp_path, "model.tflite", b"not a flatbuffer at all, but long enough to be read as one\n")
    assert_refused(cli(["compile", str(path), "--check-only", "--json"]), "model.tflite", "expected the 'TFL3' identifier")


@pytest.mark.slow
def test_compile_refuses_a_full_compile_of_a_bare_file(exported_copy):
    assert_refused(cli(["compile", str(exported_copy / "model_int8.tflite")]), "--check-only")


@pytest.mark.slow
def test_compile_require_full_mapping_on_a_float_model(exported_copy):
    before = tree_snapshot(exported_copy)
    result = cli(["compile", str(exported_copy / "model_float.tflite"), "--check-only", "--require-full-mapping"])
    assert_refused(result, "Model not quantized")
    assert tree_snapshot(exported_copy) == before


PARITY_CASES = {
    "negative max drop": (["--max-drop", "-1"], ["--max-drop -1.0, expected percentage points >= 0"]),
    "agreement above 1": (["--min-agreement", "2"], ["--min-agreement 2.0, expected a share between 0 and 1"]),
    "device results that are not JSON": (["--device-results", "{junk}"], ["cannot read device results", "expected the JSON written by `edge evaluate`"]),
    "a bundle folder that is not empty": (["--bundle", "{full}"], ["is not empty; expected a new or empty folder"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(PARITY_CASES))
def test_parity_refuses(case, exported_copy, tmp_path):
    args, needles = PARITY_CASES[case]
    _junk(tmp_path, "junk.json", b"{not json")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    args = [a.format(junk=tmp_path / "junk.json", full=tmp_path / "full") for a in args]
    before = tree_snapshot(exported_copy)
    assert_refused(cli(["parity", str(exported_copy), *args]), *needles)
    assert tree_snapshot(exported_copy) == before
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]


# --- edge classify and evaluate: bad images, options, labels and bundles -------------------------

def _image(tmp_path, name, mode, fmt) -> Path:
    from PIL import Image

    path = tmp_path / name
    Image.new(mode, (20, 20)).save(path, format=fmt)
    return path


def test_classify_names_a_cmyk_image(exported_copy, tmp_path):
    path = _image(tmp_path, "print.jpg", "CMYK", "JPEG")
    assert_refused(edge_cli(["classify", exported_copy / "model_int8.tflite", path]), "print.jpg has mode CMYK")


def test_classify_refuses_input_mean_for_a_model_with_a_recorded_contract(exported_copy, tmp_path):
    path = _image(tmp_path, "ok.png", "RGB", "PNG")
    result = edge_cli(["classify", exported_copy / "model_int8.tflite", path, "--input-mean", "128"])
    assert_refused(result, "--input-mean/--input-std do not apply")


def test_classify_refuses_a_zero_input_std(tmp_path):
    path = _image(tmp_path, "ok.png", "RGB", "PNG")
    result = edge_cli(["classify", FIXTURES / "tiny_int8.tflite", path, "--input-std", "0"])
    assert_refused(result, "input std [0.0, 0.0, 0.0]", "expected positive numbers")


def test_classify_refuses_labels_with_a_repeated_id(exported_copy, tmp_path):
    labels = _junk(tmp_path, "labels.txt", b"0 cat\n1 dog\n1 bird\n")
    path = _image(tmp_path, "ok.png", "RGB", "PNG")
    result = edge_cli(["classify", exported_copy / "model_int8.tflite", path, "--labels", labels])
    assert_refused(result, "labels.txt line 3 gives class 1 ('bird') again, first given on line 2 ('dog')")


def test_evaluate_refuses_data_that_is_not_a_folder(exported_copy, tmp_path):
    out = tmp_path / "predictions.json"
    result = edge_cli(["evaluate", exported_copy / "model_int8.tflite", "--data", tmp_path / "nowhere", "--out", out])
    assert_refused(result, "is not a directory, expected class folders or an evaluation bundle")
    assert not out.exists()


def test_evaluate_refuses_a_bundle_of_another_schema(exported_copy, tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "bundle.json").write_text(json.dumps({"schema_version": 9, "images": []}))
    result = edge_cli(["evaluate", exported_copy / "model_int8.tflite", "--data", bundle, "--out", tmp_path / "p.json"])
    assert_refused(result, "schema_version 9, expected 2")


# --- a manifest that is valid JSON but damaged: one line naming the field, for every command that reads a run ---

MANIFEST_DAMAGE = {  # name -> (what is done to the manifest, what the error says)
    "artifact without sha256": (lambda m: m["artifacts"]["model_int8"].pop("sha256"),
                                "field artifacts.model_int8.sha256 is missing; expected a sha256 of 64 lowercase hex digits"),
    "artifact without path": (lambda m: m["artifacts"]["saved_model"].pop("path"),
                              "field artifacts.saved_model.path is missing; expected the file's path inside the run directory"),
    "artifacts as a list": (lambda m: m.update(artifacts=[]), 'field artifacts is []; expected a table {key: {"path"'),
    "a number as a digest": (lambda m: m["artifacts"]["model_int8"].update(sha256=12),
                             "field artifacts.model_int8.sha256 is 12; expected a sha256 of 64 lowercase hex digits"),
    "no model section": (lambda m: m.pop("model"), "field model is missing; expected a table with the model's image_size"),
    "labels not a list": (lambda m: m.update(labels="cat,dog"), 'field labels is "cat,dog"; expected a non-empty list of class names'),
}
RUN_READERS = {  # command -> its arguments (RUN and OUT filled in)
    "export": ["export", "RUN", "--int8"],
    "compile": ["compile", "RUN"],
    "parity": ["parity", "RUN"],
    "predict": ["predict", "RUN", "--data", "digits", "--out", "OUT"],
    "report": ["report", "RUN"],
    "run": ["run", "--out", "RUN"],
}


def _damage(run_dir: Path, case: str) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    MANIFEST_DAMAGE[case][0](manifest)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(MANIFEST_DAMAGE))
def test_a_damaged_manifest_names_the_field(case, exported_copy):
    _damage(exported_copy, case)
    before = tree_snapshot(exported_copy)
    assert_refused(cli(["report", str(exported_copy)]), MANIFEST_DAMAGE[case][1], "manifest.json")
    assert tree_snapshot(exported_copy) == before


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(RUN_READERS))
def test_every_command_that_reads_a_run_refuses_a_damaged_manifest(command, exported_copy, tmp_path):
    _damage(exported_copy, "a number as a digest")
    before = tree_snapshot(exported_copy)
    args = [{"RUN": str(exported_copy), "OUT": str(tmp_path / "out.json")}.get(a, a) for a in RUN_READERS[command]]
    assert_refused(cli(args), MANIFEST_DAMAGE["a number as a digest"][1])
    assert tree_snapshot(exported_copy) == before and not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("case, needle", [
    ("a number as a digest", "manifest.json records sha256 12, expected 64 hex digits"),
    ("artifacts as a list", "has no artifacts table, expected"),
    ("artifact without sha256", "manifest.json records sha256 None, expected 64 hex digits"),
])
def test_edge_refuses_a_damaged_manifest_next_to_a_model_without_sidecar(case, needle, exported_copy, tmp_path):
    _damage(exported_copy, case)
    (exported_copy / "model_int8.tflite.json").unlink()  # the manifest is then the model's only record
    image = _image(tmp_path, "ok.png", "RGB", "PNG")
    assert_refused(edge_cli(["classify", exported_copy / "model_int8.tflite", image]), needle)
