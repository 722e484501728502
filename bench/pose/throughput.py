"""A pose model's throughput on the device path beside the detector it is built on: the same backbone and head at the
same input size, one with the keypoint output and one without, each through what `edge detect` does per image.

    /work/venv/bin/python bench/pose/throughput.py [--size 192] [--keypoints 17] [--images 200] [--rounds 3]

Both models are untrained int8 files (latency does not depend on the weights; both score every point at the head's start
logit, under the score cut, so NMS has the same nothing to do in both), converted as `pipeline export --int8` converts
them. The images are real-photo scenes (bench/detect/photo_scenes.py) as image files. Rounds alternate the two models, so the
ratio is measured side by side on a shared machine; one interpreter thread, as a board's host side runs.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def _models(size: int, keypoints: int, folder: Path):
    """(detector file, pose file): untrained int8 files of the same backbone and head."""
    import tensorflow as tf

    from pipeline.tasks.detect.heads.yolo.export import convert as convert_detector
    from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
    from pipeline.tasks.pose.heads.yolo.export import convert as convert_pose
    from pipeline.tasks.pose.heads.yolo.model import build_pose_model

    rng = np.random.default_rng(0)
    calibration = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(8)]
    tf.keras.utils.set_random_seed(0)
    detector = folder / "detector_int8.tflite"
    detector.write_bytes(convert_detector(build_yolo_detector("small_cnn", size, 1), size, ["object"], int8=True,
                                          calibration=calibration))
    tf.keras.utils.set_random_seed(0)
    pose = folder / "pose_int8.tflite"
    pose.write_bytes(convert_pose(build_pose_model("small_cnn", size, 1, keypoints), size, ["object"], int8=True,
                                  calibration=calibration))
    return detector, pose


def _images(count: int, folder: Path):
    """`count` real-photo scenes (bench/detect/photo_scenes.py, 256x192, objects in them) as the files `edge detect` reads."""
    from bench.detect.photo_scenes import scenes

    files = []
    for n, example in enumerate(scenes(count, seed=1).examples):
        path = folder / f"scene_{n:04d}.jpg"
        path.write_bytes(example.image)
        files.append(path)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=192)
    parser.add_argument("--keypoints", type=int, default=17)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from edge.answers.detect import end_to_end_rate, open_detector

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = _models(args.size, args.keypoints, folder)
        files = _images(args.images, folder)
        opened = {name: open_detector(path, threads=1) for name, path in zip(("detector", "pose"), paths)}
        rates = {name: [] for name in opened}
        for _ in range(args.rounds):
            for name, model in opened.items():
                rates[name].append(end_to_end_rate(model, files))
        sizes = {name: path.stat().st_size for name, path in zip(opened, paths)}
    median = {name: statistics.median(r) for name, r in rates.items()}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"command: python bench/pose/throughput.py {' '.join(sys.argv[1:])}")
    print(f"| model | file | images/s (median of {args.rounds}) | each round |")
    print("| --- | --- | --- | --- |")
    for name in opened:
        print(f"| {name} | {sizes[name] / 1e6:.2f} MB | {median[name]:.1f} | {', '.join(f'{r:.1f}' for r in rates[name])} |")
    ratios = [p / d for p, d in zip(rates["pose"], rates["detector"])]  # each round's pair, measured back to back
    print(f"pose / detector, median of the rounds' ratios: {statistics.median(ratios):.3f} "
          f"(each: {', '.join(f'{r:.3f}' for r in ratios)})")


if __name__ == "__main__":
    main()
