"""set_input / get_scores / top_k on the fixture models, against references computed another way."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from edge import Class, InputError, classify, dequantize, get_scores, input_size, make_interpreter, quantize, set_input, top_k
from edge.pixels.preprocess import RAW_PIXELS
from tests.support.edge_paths import FLOAT, IMAGES, INT8, LABELS, bare_scores, expected_scores


def test_quantize_and_dequantize_round_trip_and_do_not_wrap():
    q = quantize([0.0, 1.0, 254.0, 300.0, -5.0], scale=1.0, zero_point=0, dtype=np.uint8)
    assert q.tolist() == [0, 1, 254, 255, 0]
    # uint8 minus a zero point must not wrap around: cast to int64 first.
    assert dequantize(np.array([0, 255], dtype=np.uint8), 0.5, 128).tolist() == [-64.0, 63.5]
    assert quantize([0.0, 255.0], 1.0, -128, np.int8).tolist() == [-128, 127]
    with pytest.raises(InputError, match="scale 0"):
        quantize([1.0], 0, 0, np.uint8)


class FakeInterpreter:
    """Just enough of an interpreter to see exactly what set_input writes."""

    def __init__(self, dtype, scale, zero_point, size=(4, 4)):
        self.details = {"index": 0, "shape": np.array([1, size[1], size[0], 3]), "dtype": dtype, "quantization": (scale, zero_point)}
        self.written = None

    def get_input_details(self):
        return [self.details]

    def set_tensor(self, index, value):
        self.written = value


def test_uint8_scale_1_zero_point_0_takes_raw_pixels_unchanged():
    pixels = np.arange(48, dtype=np.uint8).reshape(4, 4, 3) * 5
    fake = FakeInterpreter(np.uint8, 1.0, 0)
    set_input(fake, pixels)
    assert fake.written.dtype == np.uint8 and np.array_equal(fake.written[0], pixels)


def test_other_quantization_is_applied_to_pixels():
    pixels = np.array([[[0, 128, 255]] * 4] * 4, dtype=np.uint8)
    fake = FakeInterpreter(np.int8, 1.0, -128)
    set_input(fake, pixels, RAW_PIXELS)
    assert fake.written[0, 0, 0].tolist() == [-128, 0, 127]
    fake = FakeInterpreter(np.uint8, 2.0, 10)
    set_input(fake, pixels, RAW_PIXELS)
    assert fake.written[0, 0, 0].tolist() == [10, 74, 138]  # round(p / 2) + 10, half to even



def test_a_writer_reads_the_input_details_once_and_writes_what_set_input_writes():
    from edge.answers.classify import input_writer

    class Counting(FakeInterpreter):
        asked = 0

        def get_input_details(self):
            self.asked += 1
            return super().get_input_details()

    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(3)]  # resized to the input's 4x4
    fake, reference = Counting(np.int8, 2.0, -3), FakeInterpreter(np.int8, 2.0, -3)
    write = input_writer(fake, RAW_PIXELS)
    asked = fake.asked
    for image in images:
        write(image)
        set_input(reference, image, RAW_PIXELS)
        assert fake.written.dtype == np.int8 and np.array_equal(fake.written, reference.written)
    assert fake.asked == asked  # per image: no question to the interpreter beyond set_tensor


@pytest.mark.parametrize("dtype, scale, zero_point, expected", [
    (np.uint8, 1 / 128, 128, [0, 128, 255]),  # Coral's grid (the pipeline's int8 exports): the bytes as they are
    (np.uint8, 2.0, 10, [0, 128, 255]),  # any uint8 grid: pycoral copies the bytes whatever it is
    (np.int8, 1 / 128, 0, [-128, 0, 127]),  # `--io-type int8`: the same bytes shifted into the signed range
    (np.float32, 0.0, 0, [0.0, 128.0, 255.0]),  # a float input: raw pixel values, the model normalizes inside
])
def test_without_a_normalization_pixels_go_in_as_the_inputs_own_values(dtype, scale, zero_point, expected):
    pixels = np.array([[[0, 128, 255]] * 4] * 4, dtype=np.uint8)
    fake = FakeInterpreter(dtype, scale, zero_point)
    set_input(fake, pixels)
    assert fake.written.dtype == dtype and fake.written[0, 0, 0].tolist() == expected


def test_input_size_and_resizing_with_pillow():
    interpreter = make_interpreter(INT8)
    assert input_size(interpreter) == (16, 16)
    big = Image.open(IMAGES / "red.png").resize((40, 30))
    set_input(interpreter, big)
    got = interpreter.get_tensor(interpreter.get_input_details()[0]["index"])
    set_input(interpreter, np.asarray(big.resize((16, 16), Image.BILINEAR)))
    assert np.array_equal(got, interpreter.get_tensor(interpreter.get_input_details()[0]["index"]))


def test_bad_arrays_say_what_was_expected():
    interpreter = make_interpreter(INT8)
    with pytest.raises(InputError, match=r"uint8 \[16, 16\], expected uint8 \[height, width, 3\]"):
        set_input(interpreter, np.zeros((16, 16), dtype=np.uint8))
    # Pixels are 0..255 integers by the contract: float arrays are refused, even at the right size.
    with pytest.raises(InputError, match=r"float32 \[16, 16, 3\], expected uint8"):
        set_input(interpreter, np.zeros((16, 16, 3), dtype=np.float32))


@pytest.mark.parametrize("name", ["red", "green", "blue"])
def test_scores_match_bare_interpreter_float_model_and_keras(name):
    expected = np.array(expected_scores()[f"{name}.png"])
    image = Image.open(IMAGES / f"{name}.png")
    pixels = np.asarray(image.convert("RGB"))
    int8 = make_interpreter(INT8)
    set_input(int8, image)
    int8.invoke()
    scores = get_scores(int8)
    assert scores.dtype == np.float32 and scores.shape == (3,)
    assert np.allclose(scores, bare_scores(INT8, pixels), atol=1e-6)
    # The float32 model equals Keras closely; the int8 one within quantization error.
    floats = make_interpreter(FLOAT)
    set_input(floats, pixels)
    floats.invoke()
    assert np.allclose(get_scores(floats), expected, atol=1e-4)
    assert np.allclose(scores, expected, atol=0.05)
    best = top_k(scores, k=3, labels=LABELS)
    assert best[0] == Class(LABELS.index(name), pytest.approx(float(scores.max())), name)
    assert [c.score for c in best] == sorted((c.score for c in best), reverse=True)


def test_top_k_and_classify():
    assert top_k([0.1, 0.7, 0.2], k=2) == [Class(1, pytest.approx(0.7), "1"), Class(2, pytest.approx(0.2), "2")]
    assert top_k([0.5, 0.5], k=2, labels=["a", "b"])[0].label == "a"  # ties: the lower id first
    with pytest.raises(InputError, match="2 labels for 3 model outputs"):
        top_k([0.1, 0.2, 0.3], labels=["a", "b"])
    result = classify(make_interpreter(INT8), Image.open(IMAGES / "blue.png"), k=1, labels=LABELS)
    assert [c.label for c in result] == ["blue"]
