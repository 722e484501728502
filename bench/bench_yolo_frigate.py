"""Frigate's yolo-generic reading of a YOLO run's int8 file, taken apart: the parity row's mAP with Frigate's NMS as it
is, with its corners handed to NMSBoxes as (x, y, width, height) instead, and at IoU 0.6; then, on the same
held-out pixels (edge detect's feed), the objects Frigate's reading keeps (score >= 0.4) against `edge detect`'s
(same class, IoU >= 0.9), both ways.

    .venv/bin/python bench/bench_yolo_frigate.py RUN          # a run from pipeline run --task detect --head yolo
"""
import sys
import os
os.environ["TF_USE_LEGACY_KERAS"]="1"
import numpy as np
from pathlib import Path
from edge import frigate_yolo
from edge.bundle import image_file
from edge.detect import open_detector, kept, get_raw
from pipeline.rundir.run import Run
from pipeline.tasks.detect_parity import heldout_images
from pipeline.inference.client_scores import detect_clients
from pipeline.detection.evaluate import evaluate
run = Run.open(Path(sys.argv[1]))
ex = heldout_images(run)
det = open_detector(run.artifact("model_int8"))
files = [image_file(i, e.id, e.image)[1] for i, e in enumerate(ex)]
def score(tag):
    found, refused = detect_clients(det, files, names=("frigate",))
    s = evaluate(ex, found["frigate"], run.labels)
    print(tag, round(s.map50, 4), round(s.map, 4), flush=True)
score("frigate as reproduced")
orig = frigate_yolo.nms_boxes
frigate_yolo.nms_boxes = lambda r, s, t, i: orig(np.concatenate([r[:, :2], r[:, 2:] - r[:, :2]], 1), s, t, i)
score("frigate, corners given as x,y,w,h")
frigate_yolo.NMS_IOU = 0.6
score("frigate, x,y,w,h and IoU 0.6")
frigate_yolo.nms_boxes = orig
score("frigate as reproduced but IoU 0.6")
frigate_yolo.NMS_IOU = 0.4
# real int8 model: Frigate's reading (0.4) vs edge detect (0.4), same feed (edge contract)
reader = frigate_yolo.FrigateYolo(det.runner.interpreter)
total = matched = ours_total = ours_matched = 0
def iou(a, b):
    h = max(0, min(a[2], b[2]) - max(a[0], b[0])); w = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    u = (a[2]-a[0])*(a[3]-a[1]) + (b[2]-b[0])*(b[3]-b[1]) - h*w
    return h*w/u if u > 0 else 0
from edge.classify import set_input, invoke
for e in ex:
    px = det.runner.pixels(e.image, e.id)
    set_input(det.runner.interpreter, px, det.runner.contract.norm); invoke(det.runner.interpreter, e.id)
    fb, fc, fs = frigate_yolo.objects(reader.read(det.runner.interpreter))
    o = kept(get_raw(det.runner.interpreter, det.indices), 0.4)
    for b, c in zip(fb, fc):
        total += 1; matched += any(c == c2 and iou(b, b2) >= 0.9 for b2, c2 in zip(o.boxes, o.ids))
    for b, c in zip(o.boxes, o.ids):
        ours_total += 1; ours_matched += any(c == c2 and iou(b, b2) >= 0.9 for b2, c2 in zip(fb, fc))
print(f"int8 file, {len(ex)} held-out images: Frigate's objects found by edge detect {matched}/{total}; edge detect's found by Frigate {ours_matched}/{ours_total}")
