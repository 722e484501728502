"""`edge detect` and edge.answers.detect on the device side (no TensorFlow): the four outputs read and scaled as a bare
interpreter reads them by position, the JSON and annotated images, packed labels, and bad input."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edge.answers.detect import Raw, detect_file, is_detector, objects, open_detector, output_indices
from edge.errors import ModelCheckError
from edge.model.interpreter import make_interpreter
from edge.files.workers import available_cores
from tests.support.edge_paths import CORAL, FIXTURES, IMAGES, INT8, LABELS, run_edge

DETECTOR = FIXTURES / "tiny_detector_int8.tflite"
SIZE = 64  # the fixture's input side (tests/fixtures/make_detector_fixture.py)
N = 10  # its max detections


@pytest.fixture
def detector_copy(tmp_path: Path) -> Path:
    """The detector alone in an empty folder: no sidecar, no manifest, no labels file."""
    path = tmp_path / "alone" / "detector.tflite"
    path.parent.mkdir()
    shutil.copy(DETECTOR, path)
    return path


@pytest.fixture
def wide_image(tmp_path: Path) -> Path:
    """A non-square image, so that scaling x and y by the wrong side shows."""
    rng = np.random.default_rng(3)
    path = tmp_path / "wide.png"
    Image.fromarray(rng.integers(0, 256, (48, 120, 3), dtype=np.uint8)).save(path)
    return path


def _bare(model: Path, image: Path):
    """The reference: Pillow's bilinear stretch to the input, raw bytes set (uint8 scale 1/128, zero point 128 is
    the normalization 128/128 the metadata gives), outputs read by position, boxes times the image's size."""
    interpreter = make_interpreter(model)
    detail = interpreter.get_input_details()[0]
    with Image.open(image) as im:
        width, height = im.size
        pixels = np.asarray(im.convert("RGB").resize((SIZE, SIZE), Image.BILINEAR))
    interpreter.set_tensor(detail["index"], pixels[None])
    interpreter.invoke()
    boxes, classes, scores, count = (interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details())
    k = int(count[0])
    return [(int(classes[0, i]), float(scores[0, i]),
             (boxes[0, i, 1] * width, boxes[0, i, 0] * height, boxes[0, i, 3] * width, boxes[0, i, 2] * height))
            for i in range(k)]


def test_objects_match_a_bare_interpreter_read_by_position(detector_copy, wide_image):
    detector = open_detector(detector_copy)
    found = detect_file(detector, wide_image, threshold=0.0)
    reference = _bare(detector_copy, wide_image)
    assert len(found) == len(reference) == N  # the fixture's score threshold is 0: every position holds an object
    for obj, (cls, score, box) in zip(found, reference):
        assert obj.id == cls and obj.label == LABELS[cls] and obj.score == pytest.approx(score)
        clipped = np.clip(box, 0, [120, 48, 120, 48])
        np.testing.assert_allclose(list(obj.box), clipped, atol=1e-3)


def test_signature_and_positions_name_the_same_tensors(detector_copy):
    interpreter = make_interpreter(detector_copy)
    by_signature = output_indices(interpreter)
    assert by_signature == tuple(int(d["index"]) for d in interpreter.get_output_details())


def test_threshold_and_clipping():
    raw = Raw(np.array([[-0.1, 0.2, 0.5, 1.2], [0.1, 0.1, 0.2, 0.2]], np.float32), np.array([2.0, 0.0]),
              np.array([0.9, 0.3], np.float32), 2)
    found = objects(raw, (200, 100), threshold=0.4, labels=["a", "b", "c"])
    assert [(o.label, o.id) for o in found] == [("c", 2)]
    assert tuple(found[0].box) == pytest.approx((40.0, 0.0, 200.0, 50.0))


def _one_at_a_time(raw: Raw, size, threshold, labels):
    """The reference: each detection on its own, in Python floats (clip, round the class id, scale)."""
    width, height = size
    found = []
    for box, cls, score in zip(raw.boxes, raw.classes, raw.scores):
        if score >= threshold:
            ymin, xmin, ymax, xmax = (min(max(float(v), 0.0), 1.0) for v in box)
            i = round(float(cls))
            found.append((i, labels[i] if 0 <= i < len(labels) else str(i), float(score),
                          (xmin * width, ymin * height, xmax * width, ymax * height)))
    return found


def test_objects_are_the_same_numbers_as_each_detection_read_alone():
    rng = np.random.default_rng(11)
    n = 300
    boxes = rng.uniform(-0.2, 1.2, (n, 4)).astype(np.float32)
    classes = np.concatenate([[0.5, 1.5, 2.5, 3.0], rng.integers(0, 5, n - 4)]).astype(np.float32)  # halves, unknown id 4
    raw = Raw(boxes, classes, np.sort(rng.uniform(0, 1, n).astype(np.float32))[::-1], n)
    for threshold in (0.0, 0.37):
        found = objects(raw, (641, 479), threshold, ["a", "b", "c", "d"])
        expected = _one_at_a_time(raw, (641, 479), threshold, ["a", "b", "c", "d"])
        assert 0 < len(found) == len(expected)
        assert [(o.id, o.label, o.score, tuple(o.box)) for o in found] == expected  # exactly, not approximately
        assert all(type(o.id) is int and type(o.score) is float for o in found)


def test_edge_detect_prints_writes_json_and_annotated_images(detector_copy, wide_image, tmp_path):
    out, report = tmp_path / "annotated", tmp_path / "objects.json"
    result = run_edge("detect", detector_copy, wide_image, IMAGES / "red.png", "--threshold", "0", "--out", out, "--json", report)
    assert result.exit_code == 0, result.stderr
    assert "labels: the label file packed on the model's class-id output" in result.stderr
    doc = json.loads(report.read_text())
    assert [Path(i["image"]).name for i in doc["images"]] == ["wide.png", "red.png"] and doc["errors"] == []
    first = doc["images"][0]
    assert (first["width"], first["height"]) == (120, 48) and len(first["objects"]) == N
    for obj in first["objects"]:
        assert set(obj) == {"label", "id", "score", "box"} and obj["label"] == LABELS[obj["id"]]
        b = obj["box"]
        assert set(b) == {"xmin", "ymin", "xmax", "ymax"}
        assert 0 <= b["xmin"] <= b["xmax"] <= 120 and 0 <= b["ymin"] <= b["ymax"] <= 48
    printed = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert len(printed) == 2 * N and printed[0].split()[0] == first["objects"][0]["label"]
    with Image.open(out / "wide.png") as annotated, Image.open(wide_image) as original:
        assert annotated.size == original.size
        assert np.any(np.asarray(annotated.convert("RGB")) != np.asarray(original.convert("RGB")))  # boxes drawn


def test_a_threshold_above_every_score_reports_nothing(detector_copy, wide_image):
    result = run_edge("detect", detector_copy, wide_image, "--threshold", "1")
    assert result.exit_code == 0 and "0 object(s)" in result.stdout


def test_an_unreadable_image_is_named_and_the_others_reported(detector_copy, wide_image, tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not an image")
    report = tmp_path / "objects.json"
    result = run_edge("detect", detector_copy, bad, wide_image, "--threshold", "0", "--json", report)
    assert result.exit_code == 1
    assert "broken.png" in result.stderr and "Traceback" not in result.stderr
    doc = json.loads(report.read_text())
    assert len(doc["images"]) == 1 and doc["errors"][0]["image"].endswith("broken.png")


def test_a_classifier_is_refused_with_one_line(tmp_path):
    model = tmp_path / "classifier.tflite"
    shutil.copy(INT8, model)
    result = run_edge("detect", model, IMAGES / "red.png")
    assert result.exit_code == 1
    assert "expected the detection post-processing op's 4" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()[-1]) > 0


def test_out_naming_a_file_is_refused(detector_copy, wide_image, tmp_path):
    file = tmp_path / "taken"
    file.write_text("x")
    result = run_edge("detect", detector_copy, wide_image, "--out", file)
    assert result.exit_code == 1 and "--out" in result.stderr and "is a file" in result.stderr
    assert file.read_text() == "x"


def test_output_indices_refuses_other_shapes():
    interpreter = make_interpreter(INT8)
    with pytest.raises(ModelCheckError, match="expected the detection post-processing op's 4"):
        output_indices(interpreter)


def test_edge_bench_times_a_detector_and_its_reading(detector_copy, wide_image):
    result = run_edge("bench", detector_copy, "--runs", "3", "--images", wide_image.parent)
    assert result.exit_code == 0, result.stderr
    assert "reading the detections after the invoke" in result.stdout
    workers = max(1, available_cores() - 1)  # the CPU interpreter's default: one core left to the invoke
    assert f"end to end over 1 images (decode + resize ahead on the default workers, {workers}, invoke, objects)" in result.stdout


def test_two_images_of_one_name_get_two_annotated_files(detector_copy, tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(IMAGES / "red.png", tmp_path / folder / "same.png")
    out = tmp_path / "annotated"
    result = run_edge("detect", detector_copy, tmp_path / "a" / "same.png", tmp_path / "b" / "same.png", "--out", out)
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["same.png", "same_1.png"]


SSD_SEGMENTS = [CORAL / f"ssd_mobilenet_v1_coco_quant_postprocess_segment_{k}_of_2_edgetpu.tflite" for k in range(2)]


@pytest.mark.skipif(not SSD_SEGMENTS[1].is_file(), reason=f"reference models not at {CORAL}")
def test_googles_compiled_ssd_is_read_as_a_detector():
    """Google's own SSD, compiled in two segments: the second ends in TFLite_Detection_PostProcess, and its four
    outputs are read as boxes, class ids, scores and count, by position (it has no signature names); the first,
    which ends in the Edge TPU op, is not a detector. Read, not invoked: the Edge TPU op needs the device."""
    from edge.model.interpreter import load_backend

    module = load_backend().module
    second = module.Interpreter(model_path=str(SSD_SEGMENTS[1]))
    assert output_indices(second) == tuple(int(d["index"]) for d in second.get_output_details())
    assert [int(x) for x in second.get_output_details()[0]["shape"]] == [1, 20, 4]
    assert not is_detector(module.Interpreter(model_path=str(SSD_SEGMENTS[0])))
