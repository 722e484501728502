"""Does a detector trained with a share of letterboxed images find objects when pycoral's detect_image.py feeds it
a picture that is not square (letterbox: the picture in the top-left corner, zeros right and below)?

    .venv/bin/python bench/detect/letterbox.py DIR [--shares 0.5 1.0]

1. Writes `shapes` (1,200 images, seed 0) widened to 16:9 as COCO in DIR/wide: each 128x128 picture on the left
   of a 128x228 canvas filled with its mean colour, every box kept whole.
2. Trains two detectors on it with `pipeline train --task detect` defaults, side by side as processes: as the
   code trains (LETTERBOX_SHARE of pipeline/tasks/detect/task.py letterboxed, the rest stretched) and with the share
   set to 0 in that process (every image stretched, the code before the share); with --shares, one more
   detector per share given, the share set in its process the same way.
3. Scores each run's recorded held-out images (wide) by COCOeval with both feeds: stretch (the pixel contract,
   Frigate's square region) and letterbox (pycoral's detect_image.py). Prints a markdown table.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

WITH_SHARE = ("import sys, pipeline.tasks.detect.task as d; d.LETTERBOX_SHARE = {share!r}; from pipeline.cli import main; "
              "main(sys.argv[1:])")


def write_wide(folder: Path) -> Path:
    import numpy as np
    from PIL import Image

    from pipeline.tasks.detect.data.shapes import CLASSES, shapes

    (folder / "images").mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for n, e in enumerate(shapes(1200, size=128, seed=0).examples):
        pixels = np.asarray(Image.open(io.BytesIO(e.image)).convert("RGB"))
        h, w = pixels.shape[:2]
        wide = int(round(h * 16 / 9))
        canvas = np.empty((h, wide, 3), np.uint8)
        canvas[:] = pixels.reshape(-1, 3).mean(0).astype(np.uint8)
        canvas[:, :w] = pixels
        name = f"images/{n:05d}.png"
        Image.fromarray(canvas).save(folder / name)
        images.append({"id": n, "file_name": name, "width": wide, "height": h})
        for (y0, x0, y1, x1), c in zip(e.boxes, e.classes):
            annotations.append({"id": len(annotations) + 1, "image_id": n, "category_id": int(c) + 1,
                                "bbox": [float(x0 * w), float(y0 * h), float((x1 - x0) * w), float((y1 - y0) * h)]})
    path = folder / "annotations.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": [{"id": i + 1, "name": c} for i, c in enumerate(CLASSES)]}))
    return path


def scores(run_dir: Path) -> dict:
    import tf_keras as keras

    from pipeline.tasks.detect.heads.ssd.anchors import anchors
    from pipeline.tasks.detect.evaluate import evaluate
    from pipeline.tasks.detect.data.heldout import recorded_heldout
    from pipeline.tasks.detect.heads.ssd.infer import predict
    from pipeline.rundir.run import Run
    from pipeline.tasks.detect.heads.ssd.head import recorded_anchor_spec

    run = Run.open(run_dir)
    model = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    heldout = recorded_heldout(run)
    boxes = anchors(run.image_size, recorded_anchor_spec(run))
    return {resize: evaluate(heldout, predict(model, heldout, boxes, run.image_size, resize=resize), run.labels)
            for resize in ("stretch", "letterbox")}


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--shares", type=float, nargs="*", default=[], help="more letterbox shares to train with")
    args = parser.parse_args()
    out = args.dir
    data = write_wide(out / "wide")
    train = ["train", "--task", "detect", "--data", str(data), "--no-tensorboard", "--out"]
    runs = {"with the share (as trained now)": out / "with", "share 0 (every image stretched)": out / "without",
            **{f"share {share:g}": out / f"share{share:g}" for share in args.shares}}
    shares = {"share 0 (every image stretched)": 0.0, **{f"share {share:g}": share for share in args.shares}}
    procs = [subprocess.Popen([sys.executable, "-m", "pipeline", *train, str(runs["with the share (as trained now)"])], cwd=REPO),
             *[subprocess.Popen([sys.executable, "-c", WITH_SHARE.format(share=share), *train, str(runs[name])], cwd=REPO)
               for name, share in shares.items()]]
    if any(p.wait() for p in procs):
        sys.exit("a training failed")
    from pipeline.tasks.detect.task import LETTERBOX_SHARE

    print(f"\n| training (letterbox share {LETTERBOX_SHARE:g} vs 0) | stretch feed mAP@.5 | mAP@[.5:.95] | "
          "letterbox feed (pycoral) mAP@.5 | mAP@[.5:.95] |\n|---|---|---|---|---|")
    for name, run_dir in runs.items():
        s = scores(run_dir)
        print(f"| {name} | {s['stretch'].map50:.4f} | {s['stretch'].map:.4f} | {s['letterbox'].map50:.4f} | "
              f"{s['letterbox'].map:.4f} |")


if __name__ == "__main__":
    main()
