"""Pretrained backbones: Keras' ImageNet loader offline, local weights recorded by sha256, frozen-base epochs."""
from __future__ import annotations

import hashlib
import json

import pytest

from tests.support.helpers import cli, quiet_env

pytestmark = pytest.mark.host


def assert_nothing_kept(run) -> None:
    """A train that failed wrote no run: the folder is gone, or holds only the writer lock's file, which is never
    removed (removing it would let two writers lock two different files at the same path)."""
    assert not run.exists() or sorted(p.name for p in run.iterdir()) == [".lock"], sorted(run.rglob("*"))


@pytest.mark.slow
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
    assert_nothing_kept(run)


@pytest.mark.parametrize("name, options, file, url", [
    ("efficientnet_b0", {}, "efficientnetb0_notop.h5", "https://storage.googleapis.com/keras-applications/efficientnetb0_notop.h5"),
    ("mobilenet_v3_small", {"minimalistic": 0}, "weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5",
     "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v3/weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5"),
])
def test_imagenet_offline_names_each_models_own_file(name, options, file, url, tmp_path, monkeypatch):
    """The same offline error for the newer builders; the full MobileNetV3 asks for its own (not minimalistic) file."""
    import models

    (tmp_path / "home" / ".keras").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for proxy in ("HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    with pytest.raises(models.WeightsUnavailable) as err:
        models.build(name, 3, 32, weights="imagenet", **options)
    assert f"place it at {tmp_path / 'home' / '.keras' / 'models' / file}" in str(err.value)
    assert f"download {url} " in str(err.value)


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


@pytest.fixture(scope="module")
def base_weights(tmp_path_factory):
    """A local MobileNetV2 (alpha 0.35, 32x32) base weights file, as Keras' include_top=False files are."""
    import tf_keras as keras

    path = tmp_path_factory.mktemp("weights") / "mobilenet_v2_base.h5"
    keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, include_top=False, weights=None).save_weights(str(path))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from tests.support.helpers import write_class_folders

    return write_class_folders(tmp_path_factory.mktemp("data") / "shapes", per_class=8)


def _base_after(run_dir):
    import tf_keras as keras

    model = keras.models.load_model(str(run_dir / "keras_model.keras"))
    return next(layer for layer in model.layers if isinstance(layer, keras.Model))


def _train(folder, weights, out, **options):
    from pipeline import train

    return train.train_model(train.TrainConfig(data=str(folder), model="mobilenet_v2", model_options=(("alpha", 0.35),),
                                       image_size=32, weights=str(weights), batch_size=8, **options), out)


@pytest.mark.slow
def test_frozen_epochs_then_fine_tune_keeps_batchnorm_and_records_the_file(folder, base_weights, tmp_path):
    import tf_keras as keras

    original = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, include_top=False, weights=None)
    original.load_weights(str(base_weights))
    frozen_only = _base_after(_train(folder, base_weights, tmp_path / "frozen", frozen_epochs=1, epochs=1))
    for a, b in zip(original.weights, frozen_only.weights):
        assert (a.numpy() == b.numpy()).all(), f"{a.name} changed while the base was frozen"

    run_dir = _train(folder, base_weights, tmp_path / "switch", frozen_epochs=1, epochs=2, unfreeze_from="block_15_expand")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["model"]["weights"]["source"] == "file"
    assert manifest["model"]["weights"]["sha256"] == hashlib.sha256(base_weights.read_bytes()).hexdigest()
    assert manifest["training"]["batchnorm"]["method"] == "pretrained"  # not re-estimated
    assert [e["epoch"] for e in json.loads((run_dir / "history.json").read_text())] == [1, 2]
    tuned = {w.name: w.numpy() for w in _base_after(run_dir).weights}
    changed = {w.name for w in original.weights if not (w.numpy() == tuned[w.name]).all()}
    assert any(name.startswith("block_16_") and "kernel" in name for name in changed)  # fine-tuned from block_15
    assert not any(name.startswith(("Conv1", "block_1_", "block_14_")) for name in changed)  # before it: frozen
    assert not any("moving_" in name for name in changed)  # BatchNorm in inference mode in both phases


@pytest.mark.slow
def test_resume_across_the_switch_keeps_the_frozen_phase(folder, base_weights, tmp_path):
    from tests.support.helpers import kill_after_first_epoch

    run_dir = tmp_path / "run"
    args = ["train", "--data", str(folder), "--model", "mobilenet_v2", "--alpha", "0.35", "--image-size", "32",
            "--weights", str(base_weights), "--batch-size", "8", "--frozen-epochs", "1", "--epochs", "3", "--out", str(run_dir)]
    kill_after_first_epoch(args, 3)  # the frozen phase is over; the switch comes next
    first = json.loads((run_dir / ".train_state" / "history.json").read_text())
    assert [e["epoch"] for e in first] == [1]

    result = cli(args, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resuming from epoch 1 of 3" in result.stdout and "epoch 2: base unfrozen whole" in result.stdout
    history = json.loads((run_dir / "history.json").read_text())
    assert [e["epoch"] for e in history] == [1, 2, 3]
    assert history[0] == first[0]  # the frozen epoch was restored, not trained again


@pytest.mark.parametrize("options, message", [
    ({"frozen_epochs": 1}, "give --weights"),
    ({"frozen_epochs": 3, "weights": "imagenet"}, r"frozen_epochs 3, expected 0..epochs \(2\)"),
    ({"unfreeze_from": "block_3_add", "weights": "imagenet"}, "give --frozen-epochs N too"),
    ({"model": "small_cnn", "frozen_epochs": 1, "weights": "imagenet"}, "small_cnn has no pretrained base network"),
])
def test_transfer_options_that_cannot_work_are_refused(options, message):
    from pipeline import train
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        train.TrainConfig(**{"data": "digits", "model": "mobilenet_v2", "epochs": 2, **options}).validate()


@pytest.mark.slow
def test_unknown_unfreeze_layer_is_named_and_nothing_is_kept(folder, base_weights, tmp_path):
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="--unfreeze-from 'block_99_add': no such layer in the .* base network"):
        _train(folder, base_weights, tmp_path / "run", frozen_epochs=1, epochs=2, unfreeze_from="block_99_add")
    assert_nothing_kept(tmp_path / "run")
