"""`pipeline train --client-fits`: training images fitted to the input as the known clients would fit them."""
from __future__ import annotations

import io

import numpy as np
import pytest

pytestmark = pytest.mark.host


@pytest.fixture(scope="module")
def photo():
    from PIL import Image

    from tests.support.helpers import sample_photos

    return np.asarray(Image.open(io.BytesIO(next(iter(sample_photos().values())))).convert("RGB").resize((300, 200)))


@pytest.mark.parametrize("size", [32, 96])
def test_each_fit_gives_a_static_uint8_square(photo, size):
    import tensorflow as tf

    from pipeline.data.client_fits import FITS, fit_to_size

    outs = {name: fit_to_size(tf.constant(photo), size, tf.constant(i)).numpy() for i, name in enumerate(FITS)}
    for name, out in outs.items():
        assert out.shape == (size, size, 3) and out.dtype == np.uint8, name
    assert len({out.tobytes() for out in outs.values()}) == len(FITS)  # seven different ways, not one
    # The letterbox keeps the 3:2 picture's aspect: black bars above and below, none at the sides.
    assert outs["letterbox"][0].max() == 0 and outs["letterbox"][size // 2].max() > 0


@pytest.mark.parametrize("size", [32, 96])
def test_the_client_fits_are_the_clients_own_resizes(photo, size):
    """MediaPipe's warp and pycoral's Pillow LANCZOS, as edge.clients.feeds reproduces them, within a few grey levels."""
    import tensorflow as tf
    from PIL import Image

    from edge.clients import feeds as clients
    from pipeline.data.client_fits import FITS, fit_to_size

    names = list(FITS)
    corner = fit_to_size(tf.constant(photo), size, tf.constant(names.index("corner_bilinear"))).numpy().astype(int)
    assert np.abs(corner - clients.mediapipe_classify(photo, {"shape": [1, size, size, 3], "dtype": np.uint8})[0]).max() <= 2
    lanczos = fit_to_size(tf.constant(photo), size, tf.constant(names.index("lanczos"))).numpy().astype(int)
    pillow = np.asarray(Image.fromarray(photo).resize((size, size), Image.LANCZOS)).astype(int)
    assert np.abs(lanczos - pillow).max() <= 4
    contract = fit_to_size(tf.constant(photo), size, tf.constant(names.index("contract"))).numpy().astype(int)
    assert np.abs(contract - pillow).max() > 4  # the comparisons above could fail: the filters do differ


@pytest.mark.parametrize("size", [32, 96])
def test_each_client_fit_of_a_jpeg_is_that_clients_whole_feed(tmp_path, size):
    """From the JPEG file, as training reads it: each client's fit starts from the full-size decode the client makes
    (not the contract's 1/k decode), so it gives the client's own tensor (edge.clients.feeds, checked against the real
    clients in tests/clients/test_reproductions.py) within rounding; the contract's fit stays the contract's."""
    import tensorflow as tf

    from edge.clients import feeds as clients
    from edge.pixels.contract import PixelContract
    from pipeline.data.client_fits import FITS
    from pipeline.data.decode import DECODERS
    from tests.support.helpers import write_camera_jpegs

    files = []
    for i, shape in enumerate([(420, 236), (160, 420), (311, 173)]):  # shrunk 5 to 13 times at 32, 1.7 to 4 at 96
        files += sorted(write_camera_jpegs(tmp_path / str(i), per_class=1, size=shape, seed=i).rglob("*.jpg"))
    details = {"shape": [1, size, size, 3], "dtype": np.uint8, "quantization": (1 / 128, 128)}  # bytes pass as they are
    raw = dict(details, quantization=(1.0, 0))  # the contract's raw pixels
    feeds = {"contract": lambda d: clients.edgeflow(d, raw, PixelContract()),
             "corner_bilinear": lambda d: clients.mediapipe_classify(d, details),
             "lanczos": lambda d: clients.pycoral_classify(d, details)}
    # Pillow's LANCZOS rounds to bytes between its two passes, TensorFlow's does not: a few bytes differ by more.
    limits = {"contract": (1, 0.3), "corner_bilinear": (0, 0), "lanczos": (12, 0.3)}
    for path in files:
        data = path.read_bytes()
        for name, feed in feeds.items():
            fitted = DECODERS["folder"](tf.constant(data), size, fit=tf.constant(list(FITS).index(name))).numpy()
            gap = np.abs(fitted.astype(int) - feed(data)[0].astype(int))
            assert gap.max() <= limits[name][0] and gap.mean() <= limits[name][1], (path.name, name, gap.max(), gap.mean())


def test_choices_follow_the_shares_and_the_seed():
    import tensorflow as tf

    from pipeline.data.client_fits import FITS, fit_choice

    draws = np.array([int(fit_choice(1234, tf.constant(i))) for i in range(1000)])
    shares = np.bincount(draws, minlength=len(FITS)) / len(draws)
    assert np.abs(shares - np.array(list(FITS.values()))).max() < 0.05
    assert (draws == np.array([int(fit_choice(1234, tf.constant(i))) for i in range(1000)])).all()
    assert (draws != np.array([int(fit_choice(7, tf.constant(i))) for i in range(1000)])).any()


def test_training_dataset_with_client_fits_keeps_labels_and_changes_some_pixels():
    from pipeline import data as data_mod

    source = data_mod.open_source("digits")
    indices = source.indices("all")[:200]
    plain = list(source.training_dataset(32, indices).as_numpy_iterator())
    fitted = list(source.training_dataset(32, indices, client_fits=1234).as_numpy_iterator())
    assert [label for _, label in plain] == [label for _, label in fitted]
    changed = sum(not np.array_equal(a, b) for (a, _), (b, _) in zip(plain, fitted))
    assert 0 < changed < len(plain)  # the contract's own fit stays for some, the others differ


def test_the_option_reaches_the_config_and_is_checked():
    from pipeline.errors import ConfigError
    from pipeline.training.config import TrainConfig

    assert TrainConfig(data="digits").client_fits is None  # decided from the data (client_fits.decide)
    assert TrainConfig(data="digits", client_fits=True).validate().client_fits is True
    assert TrainConfig(data="digits", client_fits=False).validate().client_fits is False
    with pytest.raises(ConfigError, match="client_fits"):
        TrainConfig(data="digits", client_fits="yes").validate()


@pytest.mark.parametrize("size, on", [(32, False), (96, False), (640, True)])
def test_by_default_the_fits_follow_whether_training_images_are_enlarged_or_shrunk(tmp_path, size, on):
    """640x480 camera JPEGs: shrunk to 32 or 96 (fits off), enlarged to 640 (on); the digits (8x8) are enlarged."""
    from pipeline.data import open_source
    from pipeline.data.client_fits import decide
    from tests.support.helpers import write_camera_jpegs

    source = open_source(str(write_camera_jpegs(tmp_path, per_class=4)))
    decision = decide(None, source, source.indices("all"), size)
    assert decision.on is on and decision.why.startswith("default: ") and f"{size}x{size}" in decision.why
    digits = open_source("digits")
    assert decide(None, digits, digits.indices("train"), size).on


@pytest.mark.parametrize("asked", [True, False])
def test_asked_fits_are_kept_whatever_the_sizes(asked):
    from pipeline.data import open_source
    from pipeline.data.client_fits import decide

    digits = open_source("digits")
    decision = decide(asked, digits, digits.indices("train"), 32)
    assert decision == (asked, "--client-fits" if asked else "--no-client-fits")
