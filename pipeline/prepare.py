"""`pipeline prepare`: a folder of class folders (or, with --task detect, COCO or YOLO detection data) ->
TFRecord shards a TPU can read. The writing is the task's (pipeline/tasks/).

    pipeline prepare data/flowers --out gs://my-bucket/flowers   (or a local folder)
    pipeline train --data 'gs://my-bucket/flowers/*.tfrec' --out runs/flowers
    pipeline prepare --task detect data/annotations.json --out data/detect-records
    pipeline prepare --task detect coco/annotations/instances_val2017.json --images coco/val2017 --out coco/val-records

Shards follow the Kaggle TPU flowers schema (`image` JPEG bytes, `class` int64, `id` bytes); each
record's id is the image's path relative to FOLDER, so the held-out split (a hash of the id) and
the manifest's data identity are the same as training on the folder. `labels.txt` beside the
shards names the classes (pipeline/data/tfrecords.py reads it). JPEGs are stored byte for byte; other
images are re-encoded to JPEG, which changes their pixels: the pixel contract decodes whatever
bytes are stored, so the device must be fed the same re-encoded images to match exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from pipeline import tasks
from pipeline.errors import ConfigError


@dataclass(frozen=True)
class PrepareConfig:
    seed: int = 1234  # seeds the shuffle: same seed, same shards
    shard_mb: float = 100.0  # target shard size; TPU guides advise ~100 MB so reads stream in parallel
    jpeg_quality: int = 95  # for images that are not JPEG already (JPEGs are copied as they are)
    prefix: str = "train"  # shard names: PREFIX-KK-COUNT.tfrec, as Kaggle's flowers shards are named
    images: Tuple[str, ...] = ()  # detect, COCO: folders its file names are also looked for in, in order (--images)

    def validate(self) -> "PrepareConfig":
        if not self.shard_mb > 0:
            raise ConfigError(f"shard size {self.shard_mb} MB, expected a positive size")
        if not 1 <= self.jpeg_quality <= 100:
            raise ConfigError(f"JPEG quality {self.jpeg_quality}, expected 1..100")
        if not self.prefix or "/" in self.prefix:
            raise ConfigError(f"shard prefix {self.prefix!r}, expected a non-empty name without '/'")
        return self


def write_shards(config: PrepareConfig, source: str, out: str, task: str = tasks.DEFAULT):
    """Write `source` (class folders; for detection, any detection data spec) as TFRecord shards into `out`;
    returns the task's result (shards, labels path, count)."""
    config.validate()
    return tasks.get(task).prepare(config, source, out)
