"""Train the small detector on `shapes` and report held-out COCO mAP with the wall time.

    .venv/bin/python bench/bench_detect_shapes.py [--steps 900] [--count 400] [--size 128]

Target (issue): float mAP@.5 >= 0.90 and mAP@[.5:.95] >= 0.60 in under 4 minutes on a 2-core machine.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

from models.detector import build_detector
from pipeline.detection.anchors import AnchorSpec, anchors
from pipeline.detection.evaluate import evaluate
from pipeline.detection.shapes import CLASSES, shapes
from pipeline.detection.train_loop import fit, predict


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=900)
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()
    start = time.perf_counter()
    source = shapes(args.count, size=args.size, seed=0)
    train = [source.examples[i] for i in source.indices("train")]
    heldout = [source.examples[i] for i in source.indices("heldout")]
    spec = AnchorSpec()
    anchor_boxes = anchors(args.size, spec)
    model = build_detector("small_cnn", args.size, len(CLASSES), spec.per_location)
    t_train = time.perf_counter()
    losses = fit(model, train, anchor_boxes, args.size, args.steps, batch_size=args.batch, learning_rate=args.lr)
    t_eval = time.perf_counter()
    scores = evaluate(heldout, predict(model, heldout, anchor_boxes, args.size), CLASSES)
    end = time.perf_counter()
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.python_version()}")
    print(f"data: shapes count={args.count} size={args.size}: {len(train)} train, {len(heldout)} held-out images")
    print(f"train: {args.steps} steps x batch {args.batch}, loss {losses[0]:.3f} -> {losses[-1]:.3f}, {t_eval - t_train:.1f} s")
    print(f"held-out mAP@.5 {scores.map50:.4f}  mAP@[.5:.95] {scores.map:.4f}  per class "
          + ", ".join(f"{k} {v:.3f}" for k, v in scores.per_class.items()))
    print(f"wall time (data + model + train + eval): {end - start:.1f} s")


if __name__ == "__main__":
    main()
