"""`edge evaluate` of a detector (no TensorFlow): every image's objects, boxes normalized to the image, written to
the predictions document (task "detect") and read back by its one reader; an image it cannot read is named."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edge.errors import InputError
from edge.model.interpreter import make_interpreter
from edge.documents.predictions import detection, encoded_detection, read_predictions, write_detections
from tests.support.edge_paths import FIXTURES, run_edge

DETECTOR = FIXTURES / "tiny_detector_int8.tflite"
SIZE = 64  # the fixture's input side


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """Three images of different shapes, one in a sub-folder."""
    folder = tmp_path / "images"
    (folder / "more").mkdir(parents=True)
    rng = np.random.default_rng(5)
    for name, (h, w) in (("a.png", (48, 120)), ("b.png", (64, 64)), ("more/c.png", (90, 30))):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(folder / name)
    return folder


def _bare(image: Path):
    """The reference: a bare interpreter fed Pillow's bilinear stretch, the outputs read by position, boxes as the
    op wrote them (normalized to the input, which the stretch makes the image), clipped to it."""
    interpreter = make_interpreter(DETECTOR)
    detail = interpreter.get_input_details()[0]
    with Image.open(image) as im:
        pixels = np.asarray(im.convert("RGB").resize((SIZE, SIZE), Image.BILINEAR))
    interpreter.set_tensor(detail["index"], pixels[None])
    interpreter.invoke()
    boxes, classes, scores, count = (interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details())
    k = int(count[0])
    return [(int(classes[0, i]), float(scores[0, i]), np.clip(boxes[0, i], 0, 1)) for i in range(k)]


def test_evaluate_writes_every_images_objects_as_a_bare_interpreter_reads_them(tmp_path, images):
    model = tmp_path / "alone" / "detector.tflite"
    model.parent.mkdir()
    shutil.copy(DETECTOR, model)
    out = tmp_path / "predictions.json"
    result = run_edge("evaluate", str(model), "--data", str(images), "--out", str(out))
    assert result.exit_code == 0, result.output + result.stderr
    assert "3 images" in result.output and f"wrote {out}" in result.output
    text = out.read_text()
    assert text.endswith("}\n") and text.count("\n") == 1  # compact: the whole document on one line
    document = json.loads(text)
    assert document["task"] == "detect" and document["top1_accuracy"] is None
    assert [p["file"] for p in document["predictions"]] == ["a.png", "b.png", "more/c.png"]
    read = read_predictions(out)
    assert read.task == "detect" and read.model_sha256 == document["model_sha256"]
    for p in read.predictions:
        reference = _bare(images / p.file)
        assert p.scores == [] and len(p.objects) == len(reference) > 0
        for o, (cls, score, box) in zip(p.objects, reference):
            assert o["id"] == cls and o["score"] == pytest.approx(score, abs=1e-6)
            np.testing.assert_allclose(o["box"], box, atol=1e-5)


def test_an_unreadable_image_is_named_and_the_others_are_written(tmp_path, images):
    (images / "broken.png").write_bytes(b"not a png")
    out = tmp_path / "predictions.json"
    result = run_edge("evaluate", str(DETECTOR), "--data", str(images), "--out", str(out))
    assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
    assert "1 of 4 images could not be read" in result.stderr and "broken.png" in result.stderr
    document = json.loads(out.read_text())
    assert len(document["predictions"]) == 3 and document["errors"][0]["file"] == "broken.png"


@pytest.mark.parametrize("objects, needle", [
    ("nothing", "has objects 'nothing'"),
    ([{"id": 0, "score": 0.5, "box": [0, 0, 1]}], "has an object"),
    ([{"id": True, "score": 0.5, "box": [0, 0, 1, 1]}], "has an object"),
])
def test_a_malformed_detection_document_is_one_clear_error(tmp_path, objects, needle):
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps({"schema_version": 1, "task": "detect", "model_sha256": "0" * 64,
                                "predictions": [{"file": "a.png", "id": "a", "label": None, "sha256": None, "objects": objects}]}))
    with pytest.raises(InputError, match=needle):
        read_predictions(path)


def test_a_document_of_an_unknown_task_is_refused(tmp_path):
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps({"schema_version": 1, "task": "segment", "predictions": []}))
    with pytest.raises(InputError, match="for task 'segment'; expected one of classify, detect"):
        read_predictions(path)


def test_an_entry_rounds_every_number_as_pythons_round_does():
    rng = np.random.default_rng(2)
    # float32 values as the op writes them, and exact halves at the 6th decimal (k / 128), the case rounding decides
    values = np.concatenate([rng.uniform(0, 1, 4000), np.arange(129) / 128, [0.0, 1.0, 1e-7, 0.9999996]]).astype(np.float32)
    boxes, scores = values[: len(values) // 4 * 4].reshape(-1, 4), values[: len(values) // 4]
    ids = np.arange(len(scores), dtype=np.int64) % 3
    entry = detection("a.png", "a", None, ids, scores, boxes)
    assert len(entry["objects"]) == len(scores)
    for o, i, s, b in zip(entry["objects"], ids, scores, boxes):
        assert o == {"id": int(i), "score": round(float(s), 6), "box": [round(float(v), 6) for v in b]}
        assert type(o["id"]) is int


def test_an_entry_of_no_objects():
    entry = detection("a.png", None, None, np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, 4), np.float32))
    assert entry["objects"] == [] and entry["label"] is None


def test_entries_written_on_the_workers_give_the_bytes_of_the_whole_document_written_at_once(tmp_path):
    rng = np.random.default_rng(4)
    args = [(f"d/{i}.png", None if i % 2 else f"id{i}", None, rng.integers(0, 9, k), rng.uniform(0, 1, k).astype(np.float32),
             rng.uniform(0, 1, (k, 4)).astype(np.float32)) for i, k in enumerate((3, 0, 25))]
    document = {"schema_version": 1, "model": 'm "quoted" \u00e9.tflite', "task": "detect", "labels": ["a", "b\\"],
                "predictions": [detection(*a) for a in args], "top1_accuracy": None, "errors": [{"file": "x", "error": "bad"}]}
    write_detections(tmp_path / "dicts.json", document)
    encoded = [encoded_detection(*a) for a in args]
    write_detections(tmp_path / "encoded.json", dict(document, predictions=encoded))
    whole = (json.dumps(document, separators=(",", ":")) + "\n").encode()
    assert (tmp_path / "dicts.json").read_bytes() == (tmp_path / "encoded.json").read_bytes() == whole
    assert [e.objects for e in encoded] == [3, 0, 25]
