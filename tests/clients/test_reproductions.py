"""edge.clients.feeds' MediaPipe reproduction against MediaPipe itself (PyPI mediapipe 1.2.2), image by image; and
pycoral's letterbox for an int8 input (a model only TensorFlow can make here) against pycoral's detect_image.py.

The tensor MediaPipe's ImageClassifier feeds is captured with a model whose scores are its input: uint8 in,
a reshape, uint8 out on the same grid (scale 1/128, zero point 128), converted here by TensorFlow. Every
output byte is a category's score, so `max_results=-1` returns every input byte exactly (score * 128 + 128).
MediaPipe's own decoded pixels (Image.numpy_view) are captured too, so the two halves are checked apart:

  - resize and value mapping: the reproduction on MediaPipe's decoded pixels equals the fed tensor exactly;
  - decoding: PNGs decode identically; MediaPipe decodes JPEGs with stb_image, Pillow with libjpeg, and their
    pixels differ by a few grey levels (IDCT and chroma upsampling rounding), so a JPEG file's reproduction is
    held to a stated tolerance, not to equality.

Images: camera-like non-square JPEG crops of two real photos, a JPEG whose EXIF says "rotate 90", PNGs in RGB,
RGBA and palette modes, and scikit-learn's 8x8 digits as the pipeline stores them (upscaled to the input).
Frigate's resize (cv2.resize INTER_LINEAR) is checked against the OpenCV that MediaPipe's environment brings.
The environments are built once per test session (.ci/mediapipe-env, .ci/edge-env), or named by EDGEFLOW_MEDIAPIPE_PYTHON
and EDGEFLOW_DEVICE_PYTHON.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edge.clients import feeds as clients
from tests.support.device_env import shared_env
from tests.support.helpers import REPO, quiet_env, write_camera_jpegs

pytestmark = [pytest.mark.host, pytest.mark.slow]

GRID = (1 / 128, 128)  # the identity model's input and output quantization: Coral's grid, as the pipeline writes
# stb_image vs libjpeg on the same JPEG: measured at most 3 grey levels and a mean of 0.1 on these files.
JPEG_MAX, JPEG_MEAN = 4, 0.25

_CAPTURE = """
import json, sys
import numpy as np
import mediapipe as mp
from mediapipe.tasks.python import vision
from mediapipe.tasks.python.core.base_options import BaseOptions
model, scale, zero_point, paths = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
options = vision.ImageClassifierOptions(base_options=BaseOptions(model_asset_path=model), max_results=-1)
out = []
with vision.ImageClassifier.create_from_options(options) as classifier:
    for path in paths:
        image = mp.Image.create_from_file(path)
        categories = classifier.classify(image).classifications[0].categories
        fed = {c.index: int(round(c.score / scale + zero_point)) for c in categories}
        out.append({"fed": [fed[i] for i in range(len(fed))], "decoded": np.asarray(image.numpy_view()).tolist()})
print(json.dumps(out))
"""

# pycoral's detect_image.py run as a program; its common.set_resized_input wrapped (called unchanged, then the
# input tensor copied) and the run stopped there: the model is no detector. The reproduction runs in the same
# process: pycoral's bytes depend on Pillow's version (LANCZOS from 160x420 to 15x39 differs by up to 5 grey
# levels between Pillow 11.3 and 13.0), and a board computes both with its own Pillow.
_PYCORAL_LETTERBOX = """
import json, runpy, sys
sys.path.insert(0, sys.argv[1])
from pycoral.adapters import common
from edge import clients
real, seen = common.set_resized_input, []
class Captured(Exception):
    pass
def capture(interpreter, *args):
    _, scale = real(interpreter, *args)
    ours = clients.pycoral_detect(sys.argv[-1], interpreter.get_input_details()[0])
    seen.append({"tensor": common.input_tensor(interpreter).tolist(), "scale": list(scale),
                 "ours": ours.tensor[0].tolist(), "our_scale": list(ours.scale)})
    raise Captured
common.set_resized_input = capture
script, model = sys.argv[1] + "/detect_image.py", sys.argv[2]
for image in sys.argv[3:]:
    sys.argv = [script, "-m", model, "-i", image]
    try:
        runpy.run_path(script, run_name="__main__")
    except Captured:
        pass
print(json.dumps(seen))
"""

_CV2_RESIZE = """
import sys
import cv2, numpy as np
src = np.load(sys.argv[1])
np.save(sys.argv[2], cv2.resize(src, (int(sys.argv[3]), int(sys.argv[4])), interpolation=cv2.INTER_LINEAR))
"""


@pytest.fixture(scope="module")
def mediapipe_python(tmp_path_factory) -> str:
    """MediaPipe's environment (.ci/mediapipe-env), or the one EDGEFLOW_MEDIAPIPE_PYTHON names."""
    given = os.environ.get("EDGEFLOW_MEDIAPIPE_PYTHON")
    if given:
        return given
    return str(shared_env(tmp_path_factory, "mediapipe-env") / "bin" / "python")


@pytest.fixture(scope="module")
def device_python(tmp_path_factory) -> str:
    """The device environment (.ci/edge-env, Python 3.9), or the one EDGEFLOW_DEVICE_PYTHON names."""
    given = os.environ.get("EDGEFLOW_DEVICE_PYTHON")
    if given:
        return given
    return str(shared_env(tmp_path_factory, "edge-env") / "bin" / "python")


def _identity_tflite(width: int, height: int, io_type: str = "uint8") -> bytes:
    """uint8 (or int8) [1, height, width, 3] in, [1, height * width * 3] out, same bytes, both on GRID."""
    import tensorflow as tf

    fn = tf.function(lambda x: tf.reshape(x, [1, height * width * 3])).get_concrete_function(
        tf.TensorSpec([1, height, width, 3], tf.float32))
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    low, high = -1.0, 127 / 128  # (high - low) / 255 is exactly 1/128, and low sits on zero point 128

    def calibration():
        rng = np.random.default_rng(0)
        for _ in range(4):
            x = rng.uniform(low, high, (1, height, width, 3)).astype(np.float32)
            x.flat[0], x.flat[1] = low, high
            yield [x]

    converter.representative_dataset = calibration
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = getattr(tf, io_type)
    return converter.convert()


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """name -> path: non-square camera JPEGs, an EXIF-rotated JPEG, RGB/RGBA/palette PNGs, digits PNGs."""
    from PIL import Image
    from sklearn.datasets import load_digits

    root = tmp_path_factory.mktemp("images")
    paths = []
    for i, size in enumerate([(311, 173), (160, 420), (420, 236), (200, 150)]):
        folder = write_camera_jpegs(root / f"cam{i}", per_class=1, size=size, seed=i)
        paths += sorted(folder.rglob("*.jpg"))
    photo = Image.open(paths[0])
    exif = photo.getexif()
    exif[0x0112] = 6  # orientation: rotate 90 clockwise to display
    paths.append(root / "rotated.jpg")
    photo.save(paths[-1], quality=92, exif=exif.tobytes())
    rgba = photo.convert("RGBA")
    rgba.putalpha(Image.fromarray(np.random.default_rng(3).integers(0, 256, photo.size[::-1], dtype=np.uint8)))
    for name, image in (("rgb.png", photo), ("rgba.png", rgba), ("palette.png", photo.convert("P"))):
        paths.append(root / name)
        image.save(paths[-1])
    digits = np.round(load_digits().images[:4] * (255.0 / 16.0)).astype(np.uint8)  # as pipeline's digits stores them
    for i, pixels in enumerate(digits):
        paths.append(root / f"digit{i}.png")
        Image.fromarray(np.repeat(pixels[..., None], 3, axis=-1)).save(paths[-1])
    return paths


def _capture(python: str, model: bytes, images, tmp: Path):
    path = tmp / "identity.tflite"
    path.write_bytes(model)
    done = subprocess.run([python, "-c", _CAPTURE, str(path), str(GRID[0]), str(GRID[1]), *map(str, images)],
                          capture_output=True, text=True, timeout=600, env=quiet_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("size", [(48, 40), (32, 32)], ids=["48x40", "32x32"])
def test_mediapipe_feeds_what_the_reproduction_computes(mediapipe_python, images, size, tmp_path):
    from PIL import Image

    width, height = size
    details = {"shape": [1, height, width, 3], "dtype": np.uint8, "quantization": GRID}
    captured = _capture(mediapipe_python, _identity_tflite(width, height), images, tmp_path)
    assert len(captured) == len(images)
    for path, seen in zip(images, captured):
        fed = np.asarray(seen["fed"], np.int64).reshape(height, width, 3)
        decoded = np.asarray(seen["decoded"], np.uint8)
        # Resize and value mapping: exact, from MediaPipe's own decoded pixels (alpha dropped after the warp).
        ours = clients.mediapipe_classify(decoded, details)[0].astype(np.int64)
        assert np.array_equal(ours, fed), (path.name, int(np.abs(ours - fed).max()))
        from_file = clients.mediapipe_classify(path, details)[0].astype(np.int64)
        mine = clients.mediapipe_pixels(path)
        assert mine.shape == decoded[..., :3].shape, path.name  # the EXIF rotation included
        if path.suffix == ".png":
            assert np.array_equal(mine, decoded[..., :3]), path.name
            assert np.array_equal(from_file, fed), path.name
        else:
            gap = np.abs(from_file - fed)
            assert gap.max() <= JPEG_MAX and gap.mean() <= JPEG_MEAN, (path.name, int(gap.max()), float(gap.mean()))
    # The reproduction is not trivially close: MediaPipe's feed is not edgeflow's contract nor pycoral's.
    from edge.pixels.contract import PixelContract
    from edge.pixels.preprocess import pass_through

    camera = images[0]
    contract = PixelContract.unrecorded(pass_through(details))
    assert not np.array_equal(clients.edgeflow(camera, details, contract), clients.mediapipe_classify(camera, details))
    assert np.abs(clients.pycoral_classify(camera, details).astype(int)
                  - clients.mediapipe_classify(camera, details).astype(int)).max() > 10
    rotated = next(p for p in images if p.name == "rotated.jpg")
    with Image.open(rotated) as stored:
        assert stored.size[::-1] != clients.mediapipe_pixels(rotated).shape[:2]  # turned upright by its EXIF


def test_mediapipe_refuses_int8_input_and_the_reproduction_says_so(images):
    from edge.errors import InputError

    with pytest.raises(InputError, match="only uint8 or float32"):
        clients.mediapipe_classify(images[0], {"shape": [1, 32, 32, 3], "dtype": np.int8, "quantization": GRID})


def test_frigate_resize_without_opencv_is_within_one_level_of_opencv(mediapipe_python, images, tmp_path):
    """The numpy fallback (a board without OpenCV) against cv2.resize INTER_LINEAR, on square regions of photos."""
    from PIL import Image

    worst = 0
    for i, path in enumerate(images[:4]):
        frame = np.asarray(Image.open(path).convert("RGB"))
        region = clients.frigate_cut(frame, clients.frigate_frame_region(frame.shape[1], frame.shape[0], (48, 48)))
        for size in ((48, 48), (300, 300)):
            np.save(tmp_path / "src.npy", region)
            done = subprocess.run([mediapipe_python, "-c", _CV2_RESIZE, str(tmp_path / "src.npy"), str(tmp_path / "out.npy"),
                                   str(size[0]), str(size[1])], capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
            opencv = np.load(tmp_path / "out.npy").astype(int)
            ours = clients._resize_linear(region, size).astype(int)
            worst = max(worst, int(np.abs(ours - opencv).max()))
    assert worst <= 1, worst


def test_pycoral_letterbox_into_an_int8_input_wraps_the_bytes_as_pycoral_does(device_python, images, tmp_path):
    """detect_image.py writes LANCZOS bytes into whatever the input is: into int8, 200 becomes -56."""
    model = tmp_path / "identity_int8.tflite"
    model.write_bytes(_identity_tflite(48, 40, "int8"))
    rgb = [p for p in images if p.suffix == ".jpg" or p.name == "rgb.png" or p.name.startswith("digit")]
    pycoral = REPO.parent / "shared" / "reference" / "pycoral"
    if not (pycoral / "detect_image.py").is_file():
        pytest.skip(f"pycoral's reference programs not at {pycoral}")
    done = subprocess.run([device_python, "-c", _PYCORAL_LETTERBOX, str(pycoral), str(model), *map(str, rgb)],
                          capture_output=True, text=True, timeout=600, env=quiet_env(PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(seen) == len(rgb)
    for path, real in zip(rgb, seen):
        assert real["our_scale"] == real["scale"], path.name
        assert np.array_equal(np.asarray(real["ours"], np.int8), np.asarray(real["tensor"], np.int8)), path.name
    assert any((np.asarray(r["tensor"]) < 0).any() for r in seen)  # the wrap happened, on real pixels
