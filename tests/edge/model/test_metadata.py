"""TFLite metadata: read from Google's own model, checked against facts the metadata does not hold; damage is a clear error."""
from __future__ import annotations

import io
import random
import struct
import zipfile

import pytest

from edge import ModelCheckError
from edge.model.metadata import associated_file, read_metadata
from edge.model.tflite_file import read_model
from tests.support.edge_paths import CORAL, EDGETPU, FLOAT, INT8

MOBILENET = CORAL / "mobilenet_v1_0.25_128_quant.tflite"
needs_reference = pytest.mark.skipif(not MOBILENET.is_file(), reason=f"reference models not at {CORAL}")


def _model() -> bytes:
    return MOBILENET.read_bytes()


def _blob_at(data: bytes) -> int:
    """Byte offset of the TFLITE_METADATA flatbuffer in the model (its vector's length is the 4 bytes before)."""
    # Its first 8 bytes: root offset, then the "M001" identifier; the reference holds it once.
    at = data.find(b"M001") - 4
    assert at > 0 and data.count(b"M001") == 1
    return at


def _zip_start(data: bytes) -> int:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return min(info.header_offset for info in archive.infolist())


def _with_zip(data: bytes, files: dict) -> bytes:
    """The model with its appended zip replaced by one holding `files` (name -> bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return data[:_zip_start(data)] + out.getvalue()


@needs_reference
def test_reference_model_metadata():
    meta = read_metadata(_model(), MOBILENET.name)
    assert meta.present and meta.name == "ImageClassifier"
    assert meta.mean == (127.5,) and meta.std == (127.5,)
    assert len(meta.inputs) == 1 and meta.inputs[0].color_space == "RGB"
    assert len(meta.outputs) == 1 and meta.outputs[0].label_files == ("imagenet_labels.txt",)
    assert meta.outputs[0].mean is None and meta.inputs[0].label_files == ()


@needs_reference
def test_normalization_agrees_with_the_input_quantization():
    # Independent fact from the tensor table: a uint8 input whose (scale, zero point) encode the
    # normalization has scale ~ 1/std and zero point ~ mean (pycoral's rule).
    data = _model()
    info = read_model(data)
    tensor = info.tensor(info.inputs[0])
    meta = read_metadata(data)
    (scale,), (zero_point,) = tensor.scales, tensor.zero_points
    assert tensor.dtype == "uint8"
    assert abs(scale * meta.std[0] - 1) < 0.01  # 0.0078125 * 127.5 = 0.996
    assert abs(zero_point - meta.mean[0]) <= 1  # 128 vs 127.5


@needs_reference
def test_packed_label_file_is_googles_label_file_line_for_line():
    data = _model()
    packed = associated_file(data, read_metadata(data).outputs[0].label_files[0]).decode("utf-8").splitlines()
    reference = (CORAL / "imagenet_labels.txt").read_text(encoding="utf-8").splitlines()
    info = read_model(data)
    assert packed == reference
    assert len(packed) == info.tensor(info.outputs[0]).shape[-1] == 1001


@needs_reference
def test_compiled_twin_keeps_the_same_metadata():
    compiled = CORAL / "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
    assert read_metadata(compiled.read_bytes()) == read_metadata(_model())


def test_model_without_metadata_gives_an_empty_result():
    for path in (INT8, FLOAT, EDGETPU):
        meta = read_metadata(path.read_bytes(), path.name)
        assert not meta.present
        assert meta.mean is None and meta.std is None and meta.outputs == () and meta.all_files() == []


@needs_reference
def test_reference_models_without_metadata_give_an_empty_result():
    for name in ("mobilenet_edgetpu_0.75_224_post_training_quant.tflite", "keras_lstm_mnist_ptq.tflite"):
        assert not read_metadata((CORAL / name).read_bytes(), name).present


def test_not_a_model_is_a_clear_error():
    with pytest.raises(ModelCheckError, match=r"notes is not a TFLite model: expected b'TFL3'"):
        read_metadata(b"just some text, long enough", "notes")


@needs_reference
def test_bad_identifier_is_a_clear_error():
    data = bytearray(_model())
    at = _blob_at(data)
    data[at + 4:at + 8] = b"M999"
    with pytest.raises(ModelCheckError, match=r"m\.tflite's TFLite metadata .* file identifier b'M999', expected b'M001'"):
        read_metadata(bytes(data), "m.tflite")


@needs_reference
def test_truncated_metadata_buffer_is_a_clear_error():
    data = bytearray(_model())
    at = _blob_at(data)
    full = struct.unpack_from("<I", data, at - 4)[0]
    assert full == 696
    for size in (0, 6, 40, 300, full - 100):
        struct.pack_into("<I", data, at - 4, size)
        with pytest.raises(ModelCheckError, match=r"^m\.tflite.*(outside the metadata|past the end of the metadata|too short|empty buffer)"):
            read_metadata(bytes(data), "m.tflite")


@needs_reference
def test_root_offset_outside_the_buffer_is_a_clear_error():
    data = bytearray(_model())
    struct.pack_into("<I", data, _blob_at(data), 0x7FFF0000)
    with pytest.raises(ModelCheckError, match=r"ModelMetadata at byte \d+ lies outside the metadata \(696 bytes\)"):
        read_metadata(bytes(data), "m.tflite")


@needs_reference
def test_removed_zip_is_a_clear_error():
    data = _model()
    stripped = data[:_zip_start(data)]
    with pytest.raises(ModelCheckError, match=r"m\.tflite has no readable zip .*expected one holding 'imagenet_labels\.txt'"):
        read_metadata(stripped, "m.tflite")
    with pytest.raises(ModelCheckError, match="no readable zip"):
        associated_file(stripped, "imagenet_labels.txt", "m.tflite")


@needs_reference
def test_zip_without_the_named_file_is_a_clear_error():
    data = _with_zip(_model(), {"labels.txt": b"a\nb\n"})
    with pytest.raises(ModelCheckError, match=r"names \['imagenet_labels\.txt'\], not in the appended zip \(it holds \['labels\.txt'\]\)"):
        read_metadata(data, "m.tflite")
    with pytest.raises(ModelCheckError, match=r"packs no file 'imagenet_labels\.txt'; its zip holds \['labels\.txt'\]"):
        associated_file(data, "imagenet_labels.txt", "m.tflite")


@needs_reference
def test_damaged_packed_file_is_a_clear_error():
    data = bytearray(_model())
    at = data.rfind(b"goldfish, Carassius auratus")
    assert at > _zip_start(bytes(data))  # the copy in the zip, stored uncompressed
    data[at] ^= 0xFF
    read_metadata(bytes(data))  # the zip's directory is intact
    with pytest.raises(ModelCheckError, match=r"packed file 'imagenet_labels\.txt' cannot be read: Bad CRC"):
        associated_file(bytes(data), "imagenet_labels.txt", "m.tflite")


@needs_reference
def test_zero_std_is_a_clear_error():
    data = bytearray(_model())
    at = _blob_at(data)
    blob = bytes(data[at:at + 696])
    half = struct.pack("<f", 127.5)
    assert blob.count(half) == 2  # the mean and the std
    data[at:at + 696] = blob.replace(half, struct.pack("<f", 0.0))
    with pytest.raises(ModelCheckError, match=r"mean \[0\.0\] and std \[0\.0\], expected finite numbers and a non-zero std"):
        read_metadata(bytes(data), "m.tflite")


@needs_reference
def test_random_damage_to_the_metadata_never_escapes_as_another_exception():
    data = _model()
    at = _blob_at(data)
    rng = random.Random(7)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            damaged[at + rng.randrange(696)] = rng.randrange(256)
        try:
            read_metadata(bytes(damaged))
            outcomes["read"] += 1
        except ModelCheckError:
            outcomes["refused"] += 1
    # Both happen: a flipped description byte is harmless, a flipped offset is not.
    assert outcomes["read"] > 0 and outcomes["refused"] > 0, outcomes
