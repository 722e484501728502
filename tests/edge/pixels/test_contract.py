"""PixelContract: read and checked once from a record, written back key for key, and deciding the JPEG decode."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edge.pixels.contract import PixelContract
from edge.errors import InputError
from edge.pixels.preprocess import PYCORAL_DEFAULT, RAW_PIXELS, load_pixels, normalization

# What manifests and sidecars have held since contract version 2 (edge.pixels.preprocess.contract() before the
# contract had an object): the recorded bytes must not change under the runs already written.
RECORDED_V2 = (
    '{"version": 2, "decode": "Pillow (JPEG: libjpeg accurate integer DCT); EXIF orientation not applied", '
    '"jpeg_scale": "largest 1/k (k in 8, 4, 2, 1) with k <= width // input width and k <= height // input height", '
    '"color": "RGB (grey repeated, palette expanded, alpha dropped; CMYK, 16-bit and float refused)", '
    '"resize": "bilinear_antialias", "crop": "stretch", "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]}'
)


def test_the_record_is_what_manifests_hold_and_reads_back_to_the_same_contract():
    assert json.dumps(PixelContract().as_record()) == RECORDED_V2
    for contract in (PixelContract(), PixelContract(PYCORAL_DEFAULT), PixelContract(normalization([1, 2, 3], [4, 5, 6], "x"), 1)):
        record = contract.as_record()
        back = PixelContract.from_record(json.loads(json.dumps(record)), "sidecar m.tflite.json")
        assert back.as_record() == record and back.version == contract.version
        assert back.norm.mean == contract.norm.mean and back.norm.std == contract.norm.std
        assert back.norm.source == "recorded in sidecar m.tflite.json"


def test_version_1_has_no_jpeg_scale_and_decodes_at_full_size():
    v1 = PixelContract(RAW_PIXELS, 1)
    assert "jpeg_scale" not in v1.as_record() and v1.as_record()["version"] == 1
    assert not v1.scaled and PixelContract().scaled
    assert not PixelContract.unrecorded(PYCORAL_DEFAULT).scaled


def _record(**changes):
    record = PixelContract().as_record()
    for key, value in changes.items():
        if value is None:
            del record[key]
        else:
            record[key] = value
    return record


@pytest.mark.parametrize("record, named", [
    ("not a dict", "records preprocessing 'not a dict', expected a pixel contract object"),
    (_record(version=None), "version None, expected one of 1, 2"),
    (_record(version="2"), "version '2', expected one of 1, 2"),
    (_record(version=True), "version True, expected one of 1, 2"),
    (_record(version=3), "version 3, expected one of 1, 2"),
    (_record(resize="bicubic"), "resize 'bicubic', expected 'bilinear_antialias'"),
    (_record(crop="center"), "crop 'center', expected 'stretch'"),
    (_record(jpeg_scale=None), "jpeg_scale None, expected 'largest 1/k"),
    (_record(mean=[1, 2]), "input mean [1.0, 2.0] (recorded in sidecar x.json), expected one number or three"),
    (_record(std=[1, 0, 1]), "input std [1.0, 0.0, 1.0] (recorded in sidecar x.json), expected positive numbers"),
])
def test_a_record_this_code_cannot_honour_is_refused_naming_the_field(record, named):
    with pytest.raises(InputError, match="sidecar x.json") as err:
        PixelContract.from_record(record, "sidecar x.json")
    assert named in str(err.value)


def test_an_unrecorded_contract_has_no_record_and_says_so():
    contract = PixelContract.unrecorded(PYCORAL_DEFAULT)
    with pytest.raises(ValueError, match="no record"):
        contract.as_record()
    details = {"dtype": np.uint8, "quantization": (1 / 128, 128)}
    assert contract.describe(details).splitlines() == [
        "input: mean 128, std 128 (pycoral's default (--input-mean 128 --input-std 128)); "
        "raw pixels pass straight into the uint8 input (scale 0.0078125, zero point 128)",
        "decode: JPEGs at full size (no recorded pixel contract)"]
    with pytest.raises(ValueError, match="version 7"):
        PixelContract(RAW_PIXELS, 7)


def test_the_version_decides_the_jpeg_decode_and_to_input_follows_the_normalization(tmp_path: Path):
    rng = np.random.default_rng(0)
    photo = tmp_path / "photo.jpg"
    Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)).save(photo, quality=90)
    v2, v1 = PixelContract().load_pixels(photo, (32, 32)), PixelContract(RAW_PIXELS, 1).load_pixels(photo, (32, 32))
    assert np.array_equal(v2, load_pixels(photo, (32, 32), scaled=True))
    assert np.array_equal(v1, load_pixels(photo, (32, 32), scaled=False))
    assert not np.array_equal(v1, v2)  # the two versions are different pixels, not the same ones faster
    # Raw pixels into a uint8 input with scale 1, zero point 0 pass unchanged; pycoral's 128/128 into (1, -128): p - 128.
    assert np.array_equal(PixelContract().to_input(v2, {"dtype": np.uint8, "quantization": (1.0, 0)})[0], v2)
    got = PixelContract(PYCORAL_DEFAULT).to_input(v2, {"dtype": np.int8, "quantization": (1 / 128, 0)})[0]
    assert np.array_equal(got.astype(np.int64), v2.astype(np.int64) - 128)
