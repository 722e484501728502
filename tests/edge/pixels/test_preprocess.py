"""The pixel contract on images a camera, a phone or a careless script produces: handled as the
contract says, or refused with a message naming the file."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edge.errors import InputError
from edge.pixels.contract import PixelContract
from edge.pixels.preprocess import (
    PYCORAL_DEFAULT,
    RAW_PIXELS,
    load_image,
    load_pixels,
    normalization,
    passes_raw,
    to_input,
)
from tests.support.edge_paths import CORAL


def _encoded(image: Image.Image, fmt: str) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def _photo() -> Image.Image:
    return Image.open(CORAL / "parrot.jpg").convert("RGB").resize((64, 48))


@pytest.mark.skipif(not (CORAL / "parrot.jpg").is_file(), reason=f"reference photo not at {CORAL}")
def test_grey_palette_and_alpha_images_become_rgb_as_the_contract_says(tmp_path: Path):
    photo = _photo()
    grey = photo.convert("L")
    got = load_pixels(_encoded(grey, "PNG"), (32, 24), name="grey.png")
    assert got.shape == (24, 32, 3) and np.array_equal(got[..., 0], got[..., 2])  # grey repeated into R, G, B
    rgba = photo.copy()
    rgba.putalpha(7)
    # Alpha is dropped, not blended: the colour channels are the photo's own.
    assert np.array_equal(load_pixels(_encoded(rgba, "PNG"), (64, 48)), np.asarray(photo))
    palette = photo.convert("P")
    assert np.array_equal(load_pixels(_encoded(palette, "PNG"), (64, 48)), np.asarray(palette.convert("RGB")))


def test_a_1x1_image_is_stretched_to_the_model_size():
    got = load_pixels(_encoded(Image.new("RGB", (1, 1), (10, 200, 30)), "PNG"), (16, 16))
    assert got.shape == (16, 16, 3) and (got == [10, 200, 30]).all()


@pytest.mark.parametrize("mode, fmt, why", [("CMYK", "JPEG", "mode CMYK"), ("I;16", "PNG", "mode I"), ("F", "TIFF", "mode F")])
def test_cmyk_16_bit_and_float_images_are_refused_by_name(tmp_path: Path, mode, fmt, why):
    path = tmp_path / f"odd.{fmt.lower()}"
    Image.new(mode, (8, 8)).save(path, format=fmt)
    with pytest.raises(InputError, match=why) as err:
        load_image(path)
    assert str(path) in str(err.value) and "expected 8-bit greyscale, palette or RGB(A)" in str(err.value)


def test_a_truncated_jpeg_is_refused_by_name(tmp_path: Path):
    data = _encoded(Image.new("RGB", (64, 64), (1, 2, 3)), "JPEG")
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"(?i)cannot read image .*cut\.jpg.*truncated"):
        load_image(path)


def test_not_an_image_and_a_missing_file_are_refused_by_name(tmp_path: Path):
    (tmp_path / "notes.jpg").write_text("not a picture")
    with pytest.raises(InputError, match=r"cannot read image .*notes\.jpg"):
        load_image(tmp_path / "notes.jpg")
    with pytest.raises(InputError, match=r"image .*gone\.jpg not found"):
        load_image(tmp_path / "gone.jpg")


def _details(dtype, scale, zero_point):
    return {"dtype": dtype, "quantization": (scale, zero_point)}


def test_values_follow_normalize_then_quantize():
    pixels = np.array([[[0, 128, 255]]], np.uint8)
    # pycoral's default on Coral's classifiers' input (scale 1/128, zero point 128): the identity.
    assert passes_raw(PYCORAL_DEFAULT, 1 / 128, 128, np.uint8)
    assert to_input(pixels, PYCORAL_DEFAULT, _details(np.uint8, 1 / 128, 128))[0].tolist() == pixels.tolist()
    # Raw pixels into an int8 input with (1, -128): p - 128.
    assert to_input(pixels, RAW_PIXELS, _details(np.int8, 1.0, -128))[0, 0, 0].tolist() == [-128, 0, 127]
    # Per-channel mean and std, computed by hand: round(((p - m) / s) / 0.5) + 3.
    norm = normalization([0, 100, 200], [1, 2, 4], "test")
    got = to_input(pixels, norm, _details(np.int8, 0.5, 3))[0, 0, 0].tolist()
    assert got == [3, 3 + round(((128 - 100) / 2) / 0.5), 3 + round(((255 - 200) / 4) / 0.5)]
    # Float inputs get the normalized values themselves.
    assert np.allclose(to_input(pixels, PYCORAL_DEFAULT, _details(np.float32, 0.0, 0))[0, 0, 0], [-1.0, 0.0, 127 / 128])


def test_bad_normalizations_and_contracts_are_refused():
    with pytest.raises(InputError, match="std"):
        normalization(0, 0, "test")
    with pytest.raises(InputError, match="one number or three"):
        normalization([1, 2], 1, "test")
    with pytest.raises(InputError, match="version 9, expected one of 1, 2"):
        PixelContract.from_record(dict(PixelContract().as_record(), version=9), "sidecar x.json")
    with pytest.raises(InputError, match="crop 'center', expected 'stretch'"):
        PixelContract.from_record(dict(PixelContract().as_record(), crop="center"), "sidecar x.json")
    assert PixelContract.from_record(PixelContract(PYCORAL_DEFAULT).as_record(), "x").norm.mean == (128.0, 128.0, 128.0)


def _jpeg(path: Path, size) -> Path:
    rng = np.random.default_rng(0)
    from PIL import Image

    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path, quality=90)
    return path


@pytest.mark.parametrize("model_size, decoded", [((224, 224), (320, 240)), ((32, 32), (80, 60)), ((300, 300), (640, 480)),
                                                 ((160, 240), (320, 240))])
def test_jpegs_decode_at_the_largest_scale_that_keeps_the_model_size(tmp_path: Path, model_size, decoded):
    path = _jpeg(tmp_path / "photo.jpg", (640, 480))
    assert load_image(path, size=model_size).size == decoded
    assert load_image(path).size == (640, 480)  # no size: full decode


def test_scaled_decoding_is_version_2_and_other_formats_are_untouched(tmp_path: Path):
    from PIL import Image

    png = tmp_path / "photo.png"
    Image.open(_jpeg(tmp_path / "photo.jpg", (640, 480))).save(png)
    assert load_image(png, size=(32, 32)).size == (640, 480)
    record = PixelContract().as_record()
    assert record["version"] == 2 and PixelContract.from_record(record, "x").scaled
    assert not PixelContract.from_record(dict(record, version=1), "x").scaled and not PixelContract.unrecorded(RAW_PIXELS).scaled
    v1 = {k: v for k, v in record.items() if k != "jpeg_scale"}
    assert PixelContract.from_record(dict(v1, version=1), "x").norm.mean == (0.0, 0.0, 0.0)  # version 1 models still run
    with pytest.raises(InputError, match="jpeg_scale None, expected 'largest 1/k"):
        PixelContract.from_record(v1, "sidecar x.json")
