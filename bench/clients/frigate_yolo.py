"""Frigate's yolo-generic reading of a YOLO run's int8 file, taken apart: the parity row's mAP with Frigate's NMS as it
is, with its corners handed to NMSBoxes as (x, y, width, height) instead, and at IoU 0.6; then, on the same
held-out pixels (edge detect's feed), the objects Frigate's reading keeps (score >= 0.4) against `edge detect`'s
(same class, IoU >= 0.9), both ways.

    .venv/bin/python bench/clients/frigate_yolo.py RUN          # a run from pipeline run --task detect --head yolo
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from unittest import mock

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # before TensorFlow loads: the run's SavedModel is tf-keras'
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from edge.clients import frigate as frigate_yolo  # noqa: E402
from edge.documents.bundle import image_file  # noqa: E402
from edge.answers.classify import invoke  # noqa: E402
from edge.answers.detect import get_raw, kept, open_detector  # noqa: E402
from pipeline.tasks.detect.evaluate import evaluate  # noqa: E402
from pipeline.tasks.detect.data.heldout import recorded_heldout  # noqa: E402
from pipeline.tasks.detect.clients import detect_clients  # noqa: E402
from pipeline.rundir.run import Run  # noqa: E402
from pipeline.tasks.detect.scores import iou  # noqa: E402

MATCH_IOU = 0.9  # "the same object": same class and boxes this close
THRESHOLD = 0.4  # Frigate's default score, and edge detect's


def as_width_height(nms_boxes):
    """Frigate's NMS fed (x, y, width, height), as NMSBoxes reads its rows, instead of the corners it passes."""
    return lambda rects, *rest: nms_boxes(np.concatenate([rects[:, :2], rects[:, 2:] - rects[:, :2]], 1), *rest)


def frigate_map(run: Run, detector, examples, files) -> str:
    found, _ = detect_clients(detector, files, names=("frigate",))
    scores = evaluate(examples, found["frigate"], run.labels)
    return f"mAP@.5 {scores.map50:.4f}, mAP@[.5:.95] {scores.map:.4f}"


def matched(mine, theirs) -> int:
    """How many of `mine` (boxes, class ids) have an object of `theirs` of the same class at IoU >= MATCH_IOU."""
    return sum(any(c == c2 and iou(b, b2) >= MATCH_IOU for b2, c2 in zip(*theirs)) for b, c in zip(*mine))


def same_objects(detector, examples) -> str:
    """Frigate's objects against edge detect's on the same int8 outputs, both ways."""
    runner = detector.runner
    reader = frigate_yolo.FrigateYolo(runner.interpreter)
    counts = np.zeros(4, int)  # Frigate's matched, Frigate's total, ours matched, ours total
    for example in examples:
        runner.feed(runner.pixels(example.image, example.id))
        invoke(runner.interpreter, example.id)
        boxes, ids, _ = frigate_yolo.objects(reader.read(runner.interpreter))
        ours = kept(get_raw(runner.interpreter, detector.indices), THRESHOLD)
        counts += (matched((boxes, ids), (ours.boxes, ours.ids)), len(ids),
                   matched((ours.boxes, ours.ids), (boxes, ids)), len(ours.ids))
    return (f"int8 file, {len(examples)} held-out images: Frigate's objects found by edge detect {counts[0]}/{counts[1]}; "
            f"edge detect's found by Frigate {counts[2]}/{counts[3]}")


def main(run_dir: str) -> None:
    run = Run.open(Path(run_dir))
    examples = recorded_heldout(run)
    detector = open_detector(run.artifact("model_int8"))
    files = [image_file(i, e.id, e.image)[1] for i, e in enumerate(examples)]
    print("frigate as reproduced:", frigate_map(run, detector, examples, files), flush=True)
    with mock.patch.object(frigate_yolo, "nms_boxes", as_width_height(frigate_yolo.nms_boxes)):
        print("frigate, corners given as x,y,w,h:", frigate_map(run, detector, examples, files), flush=True)
        with mock.patch.object(frigate_yolo, "NMS_IOU", 0.6):
            print("frigate, x,y,w,h and IoU 0.6:", frigate_map(run, detector, examples, files), flush=True)
    with mock.patch.object(frigate_yolo, "NMS_IOU", 0.6):
        print("frigate as reproduced but IoU 0.6:", frigate_map(run, detector, examples, files), flush=True)
    print(same_objects(detector, examples))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
