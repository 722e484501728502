"""edge.clients.feeds' pycoral reproductions against pycoral's own programs, image by image, tensor by tensor.

pycoral's examples/classify_image.py and examples/detect_image.py (../shared/reference/pycoral, run as programs
with runpy, on the CPU interpreter its stand-in make_interpreter gives) on camera-like non-square JPEGs, PNGs
of every colour mode and Google's parrot photo. The tensor each program feeds is read back from the
interpreter right after its own common.set_input / set_resized_input call (a wrapper that calls pycoral's
function unchanged, then copies the input tensor): the real preprocessing, captured, not recomputed.
"""
from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edge.clients import feeds as clients
from edge.errors import InputError
from tests.support.edge_paths import CORAL, INT8

PYCORAL = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "pycoral"
MOBILENET = CORAL / "mobilenet_v1_0.25_128_quant.tflite"  # uint8, scale 1/128, zero point 128: pixels pass as they are
# uint8 with scale 0.996 and zero point 0: classify_image.py's defaults normalize, then quantize.
MODELS = [MOBILENET, INT8]

pytestmark = pytest.mark.skipif(not (PYCORAL / "classify_image.py").is_file() or not MOBILENET.is_file(),
                                reason=f"pycoral's reference programs or Google's models not at {PYCORAL.parent}")
# pycoral's CPU make_interpreter is tflite_runtime's Interpreter: the device env has it (Python 3.9 to 3.11), the host
# env does not; where it is missing these tests are deselected, and the summary says so (tests/support/deselected.py).
needs_tflite_runtime = pytest.mark.tflite_runtime


def _photo_like(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Smooth light, shapes with hard edges and sensor noise: what a resize filter and antialiasing act on."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([120 + 80 * np.sin(xx / rng.uniform(9, 40) + c) * np.cos(yy / rng.uniform(9, 40)) for c in range(3)], -1)
    for _ in range(6):
        x, y = int(rng.integers(0, width - 10)), int(rng.integers(0, height - 10))
        base[y:y + int(rng.integers(5, height // 2)), x:x + int(rng.integers(3, width // 3))] = rng.integers(0, 256, 3)
    base += rng.normal(0, 12, base.shape)
    return np.clip(base, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Non-square JPEGs at camera qualities, PNGs in RGB, RGBA, palette and grey, and the parrot photo."""
    folder = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(7)
    paths = []
    for i, (w, h) in enumerate([(311, 173), (160, 420), (300, 225), (97, 61), (420, 300)]):
        paths.append(folder / f"IMG_{i}.jpg")
        Image.fromarray(_photo_like(rng, w, h)).save(paths[-1], quality=int(rng.integers(80, 96)))
    photo = Image.fromarray(_photo_like(rng, 150, 90))
    rgba = photo.copy()
    rgba.putalpha(Image.fromarray(rng.integers(0, 256, (90, 150), dtype=np.uint8)))  # alpha that must be dropped
    for mode, image in (("RGB", photo), ("RGBA", rgba), ("P", photo.convert("P")), ("L", photo.convert("L"))):
        paths.append(folder / f"shape_{mode}.png")
        image.save(paths[-1])
    paths.append(folder / "digit.png")  # an 8x8 picture, smaller than any input: pycoral upscales it
    Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(paths[-1])
    return paths + [CORAL / "parrot.jpg"]


class _Captured(Exception):
    pass


def _run_pycoral(script: str, model: Path, image: Path, monkeypatch, wrap: str):
    """Run pycoral's example `script` on (model, image); return what the wrapped common.`wrap` saw and fed."""
    monkeypatch.syspath_prepend(str(PYCORAL))
    for name in [m for m in sys.modules if m.split(".")[0] == "pycoral"]:
        monkeypatch.delitem(sys.modules, name)
    from pycoral.adapters import common

    real, seen = getattr(common, wrap), {}

    def capture(interpreter, *args):
        result = real(interpreter, *args)
        seen["tensor"] = interpreter.tensor(interpreter.get_input_details()[0]["index"])().copy()
        seen["details"] = interpreter.get_input_details()[0]
        seen["result"] = result
        if wrap == "set_resized_input":
            raise _Captured  # a classifier is no detector: stop detect_image.py before it reads boxes
        return result

    monkeypatch.setattr(common, wrap, capture)
    monkeypatch.setattr(sys, "argv", [script, "-m", str(model), "-i", str(image)])
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_path(str(PYCORAL / script), run_name="__main__")
        except _Captured:
            pass
    return seen


@needs_tflite_runtime
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_classify_image_feeds_exactly_what_the_reproduction_computes(model, images, monkeypatch):
    differing = []
    for image in images:
        seen = _run_pycoral("classify_image.py", model, image, monkeypatch, "set_input")
        ours = clients.pycoral_classify(image, seen["details"])
        assert ours.dtype == seen["tensor"].dtype and ours.shape == seen["tensor"].shape
        if not np.array_equal(ours, seen["tensor"]):
            differing.append((image.name, int(np.abs(ours.astype(int) - seen["tensor"].astype(int)).max())))
    assert not differing, differing


def test_the_normalizing_branch_is_exercised_and_differs_from_raw_bytes(images):
    """tiny_int8's input (scale 0.996, zero point 0) is not pycoral's mean 128 / std 128 grid: the bytes change."""
    from edge.model.interpreter import make_interpreter

    details = make_interpreter(INT8).get_input_details()[0]
    fed = clients.pycoral_classify(images[0], details)
    raw = clients.pycoral_classify(images[0], details, mean=0.0, std=1.0 / details["quantization"][0])
    assert fed.max() <= 128 and not np.array_equal(fed, raw)


@needs_tflite_runtime
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.name)
def test_detect_image_letterbox_matches_pycorals_set_resized_input(model, images, monkeypatch):
    checked = 0
    for image in images:
        with Image.open(image) as opened:
            mode = opened.mode
        if mode != "RGB":
            # detect_image.py does not convert: a 3-channel reshape of RGBA, palette or grey fails in pycoral too.
            with pytest.raises(Exception):
                _run_pycoral("detect_image.py", model, image, monkeypatch, "set_resized_input")
            with pytest.raises(InputError, match="needs 3"):
                clients.pycoral_detect(image, {"shape": [1, 128, 128, 3], "dtype": np.uint8})
            continue
        seen = _run_pycoral("detect_image.py", model, image, monkeypatch, "set_resized_input")
        ours = clients.pycoral_detect(image, seen["details"])
        assert ours.scale == seen["result"][1]
        assert np.array_equal(ours.tensor[0], seen["tensor"][0]), image.name
        checked += 1
    assert checked >= 6


def test_the_letterbox_keeps_the_aspect_and_pads_bottom_right_with_zeros(images):
    wide = images[0]  # 311 x 173
    boxed = clients.pycoral_detect(wide, {"shape": [1, 64, 64, 3], "dtype": np.uint8})
    scale = 64 / 311
    assert boxed.scale == (scale, scale)
    rows = int(173 * scale)
    assert boxed.tensor[0, rows:].max() == 0 and boxed.tensor[0, :rows].max() > 0


def test_a_uint8_only_client_refuses_an_int8_input(images):
    with pytest.raises(InputError, match="supports only uint8"):
        clients.pycoral_classify(images[0], {"shape": [1, 32, 32, 3], "dtype": np.int8, "quantization": (1 / 128, 0)})


def test_an_unreadable_file_is_named(tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not a jpeg")
    with pytest.raises(InputError, match="broken.jpg"):
        clients.pycoral_classify(bad, {"shape": [1, 32, 32, 3], "dtype": np.uint8, "quantization": (1 / 128, 128)})


def test_frigate_region_is_black_outside_the_frame_and_shifts_int8():
    frame = np.full((60, 100, 3), 200, np.uint8)
    details = {"shape": [1, 100, 100, 3], "dtype": np.uint8}
    fed = clients.frigate_detect(frame, details)[0]  # region (0, 0, 100, 100): the frame on top, 40 black rows below
    assert (fed[:60] == 200).all() and (fed[60:] == 0).all()
    shifted = clients.frigate_detect(frame, dict(details, dtype=np.int8))[0]
    assert shifted.dtype == np.int8 and int(shifted[50, 50, 0]) == 200 - 128 and int(shifted[99, 0, 0]) == -128
