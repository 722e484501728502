"""The YOLO head's box loss, CIoU (YOLOv8's, the default) against GIoU, on `shapes`: the same model, data, seed and steps.

    .venv/bin/python bench/detect/yolo/box_loss.py [--epochs 4] [--count 1200]

Each: small_cnn at 128 px, the detect task's training batches (flip, crop, letterbox share) through YoloTraining and
Keras' fit with Adam at 3e-3 (cosine to 0.02x), batch 16; then the held-out split's mAP by COCOeval after the
training evaluation's decode (per-class NMS IoU 0.5, 100 detections).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def one(box_iou: str, count: int, epochs: int) -> dict:
    import tensorflow as tf
    import tf_keras as keras

    from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
    from pipeline.data import Split
    from pipeline.tasks.detect.data import augment
    from pipeline.tasks.detect.heads.yolo import trainer as yolo_trainer
    from pipeline.tasks.detect.evaluate import evaluate
    from pipeline.tasks.detect.data.specs import open_detection
    from pipeline.tasks.detect.heads.yolo.infer import predict

    tf.keras.utils.set_random_seed(1234)
    source = open_detection(f"shapes?count={count}")
    split = Split(0.2, 1234)
    train = [source.examples[i] for i in source.indices("train", split)]
    heldout = [source.examples[i] for i in source.indices("heldout", split)]
    steps = len(train) // 16
    ds = augment.decoded(train).shuffle(4096, seed=0).repeat()
    ds = yolo_trainer.with_truth(augment.fitted(ds, 128, training=True, seed=0, min_crop=0.85, letterbox_share=0.25))
    ds = ds.batch(16, drop_remainder=True).map(lambda i, t: (tf.cast(i, tf.float32), t)).prefetch(2)
    model = yolo_trainer.training_model(build_yolo_detector("small_cnn", 128, len(source.labels)))
    model.box_iou = box_iou
    model.compile(optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(3e-3, steps * epochs, alpha=0.02)))
    start = time.process_time()
    model.fit(ds, steps_per_epoch=steps, epochs=epochs, verbose=0)
    cpu = time.process_time() - start
    scores = evaluate(heldout, predict(model, heldout, 128), source.labels)
    return {"box_iou": box_iou, "map50": scores.map50, "map": scores.map, "train_cpu_s": cpu, "steps": steps * epochs}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--count", type=int, default=1200)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
          f"{os.getloadavg()[0]:.1f}; shapes?count={args.count}, {args.epochs} epochs", flush=True)
    for box_iou in ("ciou", "giou"):
        r = one(box_iou, args.count, args.epochs)
        print(f"{box_iou}: held-out mAP@.5 {r['map50']:.4f} mAP@[.5:.95] {r['map']:.4f} ({r['steps']} steps, "
              f"{r['train_cpu_s']:.0f} s CPU; load average {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
