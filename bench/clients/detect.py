"""A detection run's held-out files in the real clients: COCOeval of what pycoral's detect_image.py and MediaPipe's
ObjectDetector find with the int8 file alone, next to `pipeline parity`'s rows for them (edge.clients.feeds' reproductions)
and its int8 row.

    .venv/bin/python bench/clients/detect.py RUN --device-python P39 --mediapipe-python PMP

RUN has been through `pipeline parity` (its report.json holds the rows). P39 is a Python of `.ci/edge-env --make DIR`
(tflite-runtime, Pillow, numpy < 2), PMP of `.ci/mediapipe-env --make DIR` (mediapipe 1.2.2). The held-out files are
written as parity's bundle ships them, the int8 model is copied alone into an empty folder, and each client is run
as a user runs it, with a score threshold of 0.005 (under the op's own 0.01, so every object the op keeps is
printed and the scores are comparable with parity's, which counts them all). Then the same clients given the
picture already fitted by the run's pixel contract (stretched to the model's input, saved as PNG; their boxes, in
that square's pixels, scaled back by the stretch): README's advice for a picture that is not square. Prints a
markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
PYCORAL = REPO.parent / "shared" / "reference" / "pycoral"
THRESHOLD = 0.005


def as_detections(answers, examples, side=None):
    """The drivers' objects (tests/support/detect_drivers.py: pixel boxes xmin, ymin, xmax, ymax) as Detections normalized to
    each picture (to the fitted square of SIDE pixels when given: the stretch maps normalized coordinates to the
    picture's as they are)."""
    import numpy as np

    from pipeline.tasks.detect.evaluate import Detections

    out = []
    for found, e in zip(answers, examples):
        rows = np.array([[o["id"], o["score"], *o["box"]] for o in found], np.float64).reshape(-1, 6)
        height, width = (side, side) if side else (e.height, e.width)
        boxes = rows[:, [3, 2, 5, 4]] / np.array([height, width, height, width], np.float64)
        out.append(Detections(boxes.astype(np.float32), rows[:, 0].astype(np.int32), rows[:, 1].astype(np.float32)))
    return out


def run_driver(python: str, driver: str, args, cwd: Path, env=None):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(driver)
    try:
        done = subprocess.run([python, f.name, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)
    finally:
        os.unlink(f.name)
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--device-python", required=True)
    parser.add_argument("--mediapipe-python", required=True)
    args = parser.parse_args()

    from PIL import Image

    from edge.documents.bundle import image_file
    from pipeline.tasks.detect.evaluate import evaluate
    from pipeline.tasks.detect.data.heldout import recorded_heldout
    from pipeline.rundir.run import Run
    from tests.support import detect_drivers

    run = Run.open(Path(args.run))
    report = json.loads(run.artifact("parity_report").read_text())
    examples = recorded_heldout(run)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "files").mkdir()
        (tmp / "alone").mkdir()
        files = []
        for i, e in enumerate(examples):
            name, data = image_file(i, e.id, e.image)
            path = tmp / "files" / Path(name).name
            path.write_bytes(data)
            files.append(path)
        model = tmp / "alone" / "model_int8.tflite"
        shutil.copy(run.artifact("model_int8"), model)
        (tmp / "fitted").mkdir()
        contract, side = run.contract_of("model_int8"), run.image_size
        fitted = []
        for path in files:
            out = tmp / "fitted" / (path.stem + ".png")
            Image.fromarray(contract.load_pixels(path.read_bytes(), (side, side), name=path.name)).save(out)
            fitted.append(out)
        real, given = {}, {}
        for into, inputs in ((real, files), (given, fitted)):
            into["pycoral"] = run_driver(args.device_python, detect_drivers.PYCORAL,
                                         [PYCORAL / "detect_image.py", model, THRESHOLD, *inputs],
                                         model.parent, dict(os.environ, PYTHONPATH=str(PYCORAL)))
            found = run_driver(args.mediapipe_python, detect_drivers.MEDIAPIPE, [model, THRESHOLD, *inputs], model.parent)
            # MediaPipe names the class (from the packed label file): its id is the name's place in the run's labels.
            into["mediapipe"] = [[{**o, "id": run.labels.index(o["label"])} for o in image] for image in found]
    models, rows = report["models"], report["clients"]
    print(f"{len(examples)} held-out images; float SavedModel mAP@.5 {models['float_savedmodel']['map50']:.4f}, "
          f"parity int8 {models['int8_cpu']['map50']:.4f} (mAP@[.5:.95] {models['int8_cpu']['map']:.4f})\n")
    print("| client | parity's row mAP@.5 | mAP@[.5:.95] | real client mAP@.5 | mAP@[.5:.95] | vs parity int8 (pp, mAP@.5) "
          "| real client given the contract's pixels mAP@.5 | vs parity int8 (pp) |\n|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        if "refused" in row:
            print(f"| {name} | cannot feed the model: {row['refused']} | | | | |")
            continue
        measured = evaluate(examples, as_detections(real[name], examples), run.labels) if name in real else None
        shown = f"{measured.map50:.4f} | {measured.map:.4f}" if measured else "(not run here) | "
        gap = ((measured.map50 if measured else row["map50"]) - models["int8_cpu"]["map50"]) * 100
        fed = evaluate(examples, as_detections(given[name], examples, side), run.labels).map50 if name in given else None
        fed_shown = f"{fed:.4f} | {(fed - models['int8_cpu']['map50']) * 100:+.2f}" if fed is not None else "| "
        print(f"| {name} | {row['map50']:.4f} | {row['map']:.4f} | {shown} | {gap:+.2f} | {fed_shown} |")


if __name__ == "__main__":
    main()
