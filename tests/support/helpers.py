"""Shared test helpers: running the CLIs in a subprocess and making small image data sets."""
from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def quiet_env(**extra: str) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1", **extra)
    env.pop("TF_CONFIG", None)
    env.pop("TPU_NAME", None)
    env.update(extra)
    return env


def cli(args: List[str], timeout: float = 300, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """Run `python -m pipeline ARGS` in a fresh process (TensorFlow starts clean each time)."""
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or quiet_env(), cwd=REPO)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def jpeg_bytes(image: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(image).save(out, format="JPEG", quality=quality)
    return out.getvalue()


def shape_image(label: int, rng: np.random.Generator, size: int = 40) -> np.ndarray:
    """A noisy picture of class `label`: 0 a bright square, 1 a horizontal bar, 2 a vertical bar."""
    image = rng.integers(0, 60, (size, size, 3), dtype=np.uint8)
    lo, hi = size // 4, 3 * size // 4
    if label == 0:
        image[lo:hi, lo:hi] = 230
    elif label == 1:
        image[size // 2 - 4:size // 2 + 4, :] = 230
    else:
        image[:, size // 2 - 4:size // 2 + 4] = 230
    return image


def write_kaggle_tfrecords(folder: Path, per_class: int = 40, files: int = 2, drop_feature: Optional[str] = None,
                           corrupt_index: Optional[int] = None, seed: int = 0) -> str:
    """TFRecords in the Kaggle TPU flowers schema (image JPEG bytes, class int64, id bytes); returns a glob.
    Another `seed` draws other images (a held-out set)."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    examples = [(label, i) for i in range(per_class) for label in range(3)]
    writers = [tf.io.TFRecordWriter(str(folder / f"train-{k:02d}.tfrec")) for k in range(files)]
    for n, (label, i) in enumerate(examples):
        image = jpeg_bytes(shape_image(label, rng))
        if n == corrupt_index:
            image = image[:len(image) // 3]  # a truncated JPEG
        feature = {
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
            "class": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"img{n}".encode()])),
        }
        feature.pop(drop_feature, None)
        writers[n % files].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    for w in writers:
        w.close()
    return str(folder / "train-*.tfrec")


def write_class_folders(root: Path, per_class: int = 20) -> Path:
    from PIL import Image

    rng = np.random.default_rng(1)
    for label, name in enumerate(("square", "hbar", "vbar")):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            Image.fromarray(shape_image(label, rng)).save(root / name / f"{i:03d}.png")
    return root


def int8_tflite(model, image_size: int, batch=1, io_type=None) -> bytes:
    """Full-integer int8 conversion of a Keras model at a fixed batch (None = dynamic), calibrated on
    random pixels: enough to test what the converter emits, not accuracy."""
    import tensorflow as tf

    io_type = io_type or tf.uint8
    fn = tf.function(lambda x: model(x)).get_concrete_function(tf.TensorSpec([batch, image_size, image_size, 3], tf.float32))
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    converter.representative_dataset = lambda: (
        [rng.integers(0, 256, (1, image_size, image_size, 3)).astype(np.float32)] for _ in range(8))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = io_type
    converter.inference_output_type = io_type
    return converter.convert()


def sample_photos() -> dict:
    """scikit-learn's two real photos (640x427 JPEGs that ship with it): name -> encoded bytes."""
    import sklearn

    folder = Path(sklearn.__file__).parent / "datasets" / "images"
    return {name: (folder / f"{name}.jpg").read_bytes() for name in ("china", "flower")}


def write_camera_jpegs(root: Path, per_class: int = 20, size=(640, 480), seed: int = 0, halves: bool = False) -> Path:
    """Class folders of camera-size, non-square JPEGs cut from the two real photos: random crops,
    flips and exposure, saved at camera-like qualities. Class = which photo the crop came from;
    with `halves`, which half of which photo (4 classes: china_left, china_right, flower_left, flower_right)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name, data in sample_photos().items():
        photo = Image.open(io.BytesIO(data)).convert("RGB")
        regions = [(f"{name}_left", 0, photo.width // 2), (f"{name}_right", photo.width // 2, photo.width)] if halves \
            else [(name, 0, photo.width)]
        for folder, left, right in regions:
            (root / folder).mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                # A crop at least half the region's width (200 px of the whole photo), inside the region.
                w = int(rng.integers(min(200, (right - left) // 2), right - left))
                h = int(rng.integers(150, photo.height))
                x, y = left + int(rng.integers(0, right - left - w + 1)), int(rng.integers(0, photo.height - h + 1))
                crop = photo.crop((x, y, x + w, y + h)).resize(size, Image.BILINEAR)
                if rng.random() < 0.5:
                    crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
                pixels = np.clip(np.asarray(crop, np.float32) * rng.uniform(0.7, 1.2), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(root / folder / f"IMG_{i:04d}.jpg", quality=int(rng.integers(80, 96)))
    return root


def tree_snapshot(root: Path) -> dict:
    """Every file and folder under root (hidden ones too) with its bytes, to assert "byte for byte unchanged"."""
    root = Path(root)
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def start_worker(index: int, workers: List[str], args: List[str]) -> subprocess.Popen:
    """`python -m pipeline ARGS` as MultiWorkerMirroredStrategy worker `index` of `workers` (host:port list)."""
    tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
    return subprocess.Popen([sys.executable, "-m", "pipeline", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env=quiet_env(TF_CONFIG=tf_config))


def kill_after_first_epoch(args: List[str], epochs: int) -> None:
    """Run `python -m pipeline ARGS` and SIGKILL it when it prints "epoch 1/EPOCHS": an interruption, not a clean exit."""
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "pipeline", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=REPO, env=quiet_env(), start_new_session=True)  # signalled alone
    try:
        for line in proc.stdout:
            if line.startswith(f"epoch 1/{epochs}"):
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=60)


def record_artifact(run_dir: Path, key: str, path: Path, manifest: Optional[dict] = None, **facts) -> dict:
    """Test set-up: record `path` under `key` in RUN's manifest (as a stage would), or in `manifest` when given
    (a manifest a test is fabricating, not yet saved). Returns the manifest, saved."""
    from pipeline.rundir import manifest as manifest_io
    from pipeline.rundir.files import sha256_of

    manifest = manifest if manifest is not None else manifest_io.load(run_dir)
    rel = Path(path).resolve().relative_to(Path(run_dir).resolve()).as_posix()
    manifest.setdefault("artifacts", {})[key] = {"path": rel, "sha256": sha256_of(Path(path)), **facts}
    manifest_io.save(run_dir, manifest)
    return manifest


def forget_artifact(run_dir: Path, key: str) -> None:
    """Test set-up: drop `key`'s record from RUN's manifest, leaving its file."""
    from pipeline.rundir import manifest as manifest_io

    manifest = manifest_io.load(run_dir)
    manifest["artifacts"].pop(key, None)
    manifest_io.save(run_dir, manifest)


def tensorboard_scalars(log_dir: Path) -> dict:
    """{tag: {step: [values]}} of every scalar in the event files under log_dir (read with TensorFlow's own reader)."""
    import tensorflow as tf

    scalars: dict = {}
    for events in sorted(Path(log_dir).glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                # tf.summary (TF2) writes scalars as tensors marked for the scalars plugin; the old API as simple_value.
                if value.HasField("simple_value"):
                    number = value.simple_value
                elif value.metadata.plugin_data.plugin_name == "scalars":
                    number = float(tf.make_ndarray(value.tensor))
                else:
                    continue  # the model's config, written as text
                scalars.setdefault(value.tag, {}).setdefault(event.step, []).append(number)
    return scalars


def tensorboard_has_graph(log_dir: Path) -> bool:
    import tensorflow as tf

    return any(event.HasField("graph_def") for events in Path(log_dir).glob("events.out.tfevents.*")
               for event in tf.compat.v1.train.summary_iterator(str(events)))


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of a module's trained run in the test's own folder, so a test may change it freely."""
    import shutil

    return Path(shutil.copytree(run_dir, tmp_path / "run"))


def black_frames(folder: Path, size: int, count: int = 4) -> Path:
    """A .npy of `count` black uint8 frames [count, size, size, 3] (a camera before its exposure settles): as
    calibration data they collapse every activation range, a real int8 failure the remedy ladder must repair."""
    path = Path(folder) / "black.npy"
    np.save(path, np.zeros((count, size, size, 3), np.uint8))
    return path


def manifest_of(run_dir: Path) -> dict:
    """RUN's manifest.json as saved."""
    return json.loads((Path(run_dir) / "manifest.json").read_text())
