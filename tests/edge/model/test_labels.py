"""Label files as pycoral reads them (one per line, or `ID name` with gaps), and the label file packed in a model."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edge import InputError, ModelCheckError, make_interpreter
from edge.model.labels import MAX_CLASS_ID, choose_labels, labels_from_model, parse_labels, read_labels
from edge.model.tflite_file import read_model
from tests.support.edge_paths import CORAL, FIXTURES, INT8, LABELS

MOBILENET = CORAL / "mobilenet_v1_0.25_128_quant.tflite"
needs_reference = pytest.mark.skipif(not MOBILENET.is_file(), reason=f"reference models not at {CORAL}")


def test_one_label_per_line():
    assert read_labels(FIXTURES / "labels.txt") == LABELS


def test_id_lines_keep_their_ids_and_fill_gaps_with_the_id():
    # COCO's label files skip ids (12, 26, ...); the list still maps class id -> label.
    text = "0  person\n1  bicycle\n2  car\n12  stop sign\n13  parking meter\n"
    labels = parse_labels(text)
    assert len(labels) == 14
    assert labels[0] == "person" and labels[12] == "stop sign" and labels[13] == "parking meter"
    assert labels[3:12] == [str(i) for i in range(3, 12)]


def test_id_lines_in_any_order_with_colons_and_commas():
    assert parse_labels("2:cat\n0 background\n1\ttench, Tinca tinca\n") == ["background", "tench, Tinca tinca", "cat"]


def test_numbers_alone_are_names():
    # Digit classes written one per line: a number with no name after it is the label itself.
    assert parse_labels("0\n1\n2\n") == ["0", "1", "2"]


def test_mixed_file_takes_each_line_by_pycorals_rule():
    # pycoral decides per line: a numbered line gives its id, any other line its row number.
    assert parse_labels("background\n1 tench\ngoldfish\n") == ["background", "tench", "goldfish"]
    # So a plain name that starts with a number moves: row 1 is left empty, "wheeler" is class 3.
    assert parse_labels("cat\n3 wheeler\ndog\n") == ["cat", "1", "dog", "wheeler"]


def test_duplicate_ids_are_refused():
    with pytest.raises(InputError, match=r"coco line 3 gives class 1 \('car'\) again, first given on line 2 \('bicycle'\); expected each id once"):
        parse_labels("0 person\n1 bicycle\n1 car\n", "coco")
    # A mixed file where a row number meets a written id, too (pycoral would overwrite silently).
    with pytest.raises(InputError, match="gives class 1"):
        parse_labels("0 a\nb\n1 c\n")


def test_empty_and_blank_files_are_refused(tmp_path: Path):
    for text in ("", "\n\n", "   \n"):
        path = tmp_path / "labels.txt"
        path.write_text(text)
        with pytest.raises(InputError, match=r"labels file .*labels\.txt is empty, expected one label per line, or `ID label` lines"):
            read_labels(path)


def test_trailing_blank_lines_are_not_classes():
    assert parse_labels("a\nb\n\n\n") == ["a", "b"]


def test_huge_id_is_refused():
    with pytest.raises(InputError, match=rf"line 1 gives class id {MAX_CLASS_ID + 1}, expected at most {MAX_CLASS_ID}"):
        parse_labels(f"{MAX_CLASS_ID + 1} volt\n")


def test_unreadable_files_are_clear_errors(tmp_path: Path):
    with pytest.raises(InputError, match="cannot read labels file"):
        read_labels(tmp_path / "missing.txt")
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.txt is not UTF-8 text \(bad byte at 3\)"):
        read_labels(path)


def test_choose_labels_still_prefers_the_file_then_the_record(tmp_path: Path):
    path = tmp_path / "labels.txt"
    path.write_text("0 x\n2 z\n")
    assert choose_labels(path, ["a", "b"])[0] == ["x", "1", "z"]
    assert choose_labels(None, ["a", 1]) == (["a", "1"], "labels: recorded next to the model")
    assert choose_labels(None, None, INT8.read_bytes())[0] is None  # no record, nothing packed: class ids


def test_model_without_metadata_has_no_packed_labels():
    assert labels_from_model(INT8.read_bytes()) is None


@needs_reference
def test_packed_labels_are_googles_labels_one_per_class():
    data = MOBILENET.read_bytes()
    labels = labels_from_model(data)
    info = read_model(data)
    assert labels == read_labels(CORAL / "imagenet_labels.txt")
    assert len(labels) == info.tensor(info.outputs[0]).shape[-1] == 1001
    assert labels[0] == "background" and labels[89] == "macaw"
    assert labels_from_model(data, output=1) is None  # the model has one output


@needs_reference
def test_packed_labels_name_what_the_model_sees():
    # The real thing: pycoral feeds this model raw RGB pixels (its input quantization encodes the
    # normalization); the top class then names the parrot (Coral README: 89, macaw).
    interpreter = make_interpreter(MOBILENET, edgetpu=False)
    detail = interpreter.get_input_details()[0]
    height, width = detail["shape"][1:3]
    pixels = np.asarray(Image.open(CORAL / "parrot.jpg").convert("RGB").resize((width, height), Image.BILINEAR))
    interpreter.set_tensor(detail["index"], pixels[np.newaxis].astype(detail["dtype"]))
    interpreter.invoke()
    scores = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])[0]
    assert labels_from_model(MOBILENET.read_bytes())[int(np.argmax(scores))] == "macaw"


@needs_reference
def test_bad_packed_label_file_is_a_model_error():
    data = MOBILENET.read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        start = min(info.header_offset for info in archive.infolist())
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("imagenet_labels.txt", "0 background\n0 tench\n")
    with pytest.raises(ModelCheckError, match=r"imagenet_labels\.txt packed in m\.tflite line 2 gives class 0"):
        labels_from_model(data[:start] + out.getvalue(), name="m.tflite")


def test_names_only_is_the_rule_of_the_labels_txt_beside_tfrecords():
    # Every line a name (an `ID name` line too), line N naming class id N; trailing blank lines dropped.
    assert parse_labels("cat\n0 dog\n\n", "labels.txt", names_only=True) == ["cat", "0 dog"]
    with pytest.raises(InputError, match="labels.txt is not a list of class names: line 2 is blank"):
        parse_labels("a\n\nb\n", "labels.txt", names_only=True)
    with pytest.raises(InputError, match=r"labels.txt is not a list of class names: line 3 repeats 'a' \(line 1\)"):
        parse_labels("a\nb\na\n", "labels.txt", names_only=True)
    with pytest.raises(InputError, match="labels.txt is empty, expected one distinct name a line"):
        parse_labels("\n", "labels.txt", names_only=True)
