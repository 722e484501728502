"""Pretrained backbones: Keras' ImageNet loader offline, local weights recorded by sha256, frozen-base epochs."""
from __future__ import annotations

import hashlib
import json

import pytest

from tests.helpers import cli, quiet_env

pytestmark = pytest.mark.host


def test_imagenet_offline_exits_1_naming_the_cache_file_and_url(tmp_path):
    # A proxy on a closed port makes the fetch fail here as on a machine without internet.
    (tmp_path / "home" / ".keras").mkdir(parents=True)
    env = quiet_env(HOME=str(tmp_path / "home"), HTTPS_PROXY="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    run = tmp_path / "run"
    result = cli(["train", "--data", "digits", "--model", "mobilenet_v2", "--alpha", "0.35", "--image-size", "32",
                  "--weights", "imagenet", "--epochs", "1", "--out", str(run)], env=env, timeout=180)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    cache = tmp_path / "home" / ".keras" / "models" / "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_0.35_224_no_top.h5"
    assert f"place it at {cache}" in result.stderr
    assert "download https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/" \
           "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_0.35_224_no_top.h5" in result.stderr
    assert not run.exists()


def test_small_cnn_has_no_imagenet_weights():
    import models

    with pytest.raises(ValueError, match="small_cnn has no ImageNet weights; expected a local weights file"):
        models.build("small_cnn", 3, 16, weights="imagenet")


def test_local_weights_are_recorded_by_sha256(tmp_path):
    import models

    path = tmp_path / "w.weights.h5"
    models.build("small_cnn", 3, 16).save_weights(str(path))
    built = models.build_recorded("small_cnn", 3, 16, weights=path)
    assert built.weights == {"source": "file", "path": str(path.resolve()), "url": None,
                             "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert models.build_recorded("small_cnn", 3, 16).weights is None
