"""The training feed: TFRecord shards read interleaved select exactly the split; cached when it fits the budget."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.helpers import write_kaggle_tfrecords

pytestmark = pytest.mark.host


def test_interleaved_shards_give_exactly_the_training_split(tmp_path):
    from pipeline import data

    source = data.open_source(write_kaggle_tfrecords(tmp_path / "rec", per_class=10, files=3))
    indices = source.indices("train", data.Split(0.3, 5))
    images, labels = data.to_numpy(source.training_dataset(16, indices))
    expected_images, expected_labels = data.to_numpy(source.dataset_at(16, indices))
    assert len(labels) == len(indices) < source.num_examples
    key = lambda ims, ys: sorted((int(y), im.tobytes()) for im, y in zip(ims, ys))
    assert key(images, labels) == key(expected_images, expected_labels)
    assert not np.array_equal(images, expected_images)  # the shards were read interleaved, not one after another


@pytest.mark.parametrize("cache_mb, cached", [(None, True), (0, False)])
def test_the_feed_is_cached_when_it_fits_the_budget(tmp_path, cache_mb, cached):
    from pipeline import train

    pattern = write_kaggle_tfrecords(tmp_path / "rec", per_class=10, files=2)
    options = {} if cache_mb is None else {"cache_mb": cache_mb}
    run_dir = train.train_model(train.TrainConfig(data=pattern, image_size=16, epochs=2, batch_size=8, **options), tmp_path / "run")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    feed = manifest["training"]["feed"]
    trained = manifest["data"]["split"]["train_examples"]
    assert feed["cached"] is cached and feed["decoded_mb"] == round(trained * (16 * 16 * 3 + 4) / 1e6, 1)
    assert trained + manifest["data"]["split"]["tuning_examples"] == 24
    assert len(json.loads((run_dir / "history.json").read_text())) == 2


def test_the_record_check_refuses_what_a_full_decode_refuses(tmp_path):
    """check_image decodes JPEGs at their smallest scale; a truncated, a CMYK and a non-image file are refused with
    the full decode's own message, and a whole greyscale JPEG passes."""
    import io
    import re

    from PIL import Image

    from edge.errors import InputError
    from edge.pixels.preprocess import load_image
    from pipeline.data.decode import check_image
    from pipeline.errors import DataError

    def jpeg(mode, size=(200, 120)):
        out = io.BytesIO()
        Image.new(mode, size, 128).save(out, format="JPEG", quality=90)
        return out.getvalue()

    whole = jpeg("RGB")
    for bad in (whole[: len(whole) // 2], jpeg("CMYK"), b"not an image at all"):
        with pytest.raises(InputError) as full:
            load_image(bad, "x")
        with pytest.raises(DataError) as checked:
            check_image(bad, "x")
        def message(err):  # without the address of the BytesIO object PIL names
            return re.sub(r" at 0x[0-9a-f]+", "", str(err.value))

        assert message(checked) == message(full)
    check_image(jpeg("L"), "grey")
    check_image(whole, "whole")


def test_the_feeds_run_without_the_autotuning_thread():
    """Freeing an iterator waits for tf.data's autotuning thread, which can miss its cancellation and sleep out a
    period of up to a minute (bench/training/feed_teardown.py): the training and evaluation pipelines run without it,
    their AUTOTUNE stages at the host's core count, and still give model-ready batches."""
    import os

    import tensorflow as tf

    from pipeline import data

    examples = tf.data.Dataset.from_tensor_slices((np.arange(8 * 48, dtype=np.uint8).reshape(8, 4, 4, 3), np.arange(8, dtype=np.int32)))
    for built in (data.training_pipeline(examples, 4, seed=0), data.eval_pipeline(examples, 4)):
        options = built.options()
        assert options.autotune.enabled is False
        assert options.autotune.initial_parallelism == os.cpu_count()
        images, labels = next(iter(built))
        assert images.dtype == tf.float32 and images.shape == (4, 4, 4, 3) and labels.shape == (4,)
