"""Top-1 of one int8 model as each known client feeds it: edgeflow's contract, the reproductions in edge.clients.feeds,
and the real clients where they run here (pycoral's classify_image.py, MediaPipe's ImageClassifier).

    .venv/bin/python bench/clients/classify.py [--image-size 48 ...] [--model mobilenet_v2 --alpha 0.35] [--camera] [--digits] \
        [--device-python P39] [--mediapipe-python P] [--client-fits off|on|both] > bench/results/clients.md
    .venv/bin/python bench/clients/classify.py --run RUN [--device-python P39] [--mediapipe-python P]

Data: four classes (the left and right halves of scikit-learn's two photos), 200 JPEG crops each, cut at
random places and sizes and saved at their own non-square size (160 to 420 px a side), flipped and exposed
at random, camera JPEG qualities; a seeded 20% is held out (157 images). A model per --image-size (--model: a
small CNN by default) is trained, exported to int8 and scored by `pipeline parity`; then every held-out file,
byte for byte as parity's bundle ships it, is fed to the int8 model as each client would (the .tflite alone, no sidecar for the real clients).
With --digits, the same for `pipeline run`'s 8x8 digits model. Without --device-python / --mediapipe-python the
environments are built with .ci/edge-env and .ci/mediapipe-env (a minute or two). --client-fits both trains
every model twice, without and with `pipeline train --client-fits`, same seed, same split. --run measures an
existing run's int8 model (exported and checked by parity) instead of training any.
Deterministic apart from training: no timing.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import argparse
import io
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
PYCORAL = REPO.parent / "shared" / "reference" / "pycoral"

_PYCORAL_DRIVER = """
import contextlib, io, json, runpy, sys
script, model, images = sys.argv[1], sys.argv[2], sys.argv[3:]
answers = []
for image in images:
    sys.argv = [script, "-m", model, "-i", image]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(script, run_name="__main__")
    answers.append(int(out.getvalue().strip().splitlines()[-1].split(":")[0]))
print(json.dumps(answers))
"""

_MEDIAPIPE_DRIVER = """
import json, sys
import mediapipe as mp
from mediapipe.tasks.python import vision
from mediapipe.tasks.python.core.base_options import BaseOptions
options = vision.ImageClassifierOptions(base_options=BaseOptions(model_asset_path=sys.argv[1]), max_results=1)
with vision.ImageClassifier.create_from_options(options) as classifier:
    print(json.dumps([classifier.classify(mp.Image.create_from_file(p)).classifications[0].categories[0].index
                      for p in sys.argv[2:]]))
"""


# The pycoral reproduction run on the device env's Pillow, numpy and interpreter (tflite_runtime's, as pycoral's
# CPU make_interpreter gives: ai_edge_litert's int8 kernels can flip a near tie), the answer picked by pycoral's
# rule (classify.get_classes: np.argpartition over the dequantized scores, which breaks a tie at the top its own
# way, unlike argmax's first):
# answer for answer what the real pycoral says there. LANCZOS bytes also differ between Pillow versions.
_REPRODUCED_ON_DEVICE = """
import json, sys
import numpy as np
from tflite_runtime.interpreter import Interpreter
from edge.clients import feeds as clients
interpreter = Interpreter(model_path=sys.argv[1])
interpreter.allocate_tensors()
details, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
answers = []
for path in sys.argv[2:]:
    interpreter.set_tensor(details["index"], clients.pycoral_classify(path, details))
    interpreter.invoke()
    scale, zero_point = out["quantization"]
    scores = scale * (interpreter.get_tensor(out["index"]).flatten().astype(np.int64) - zero_point)
    answers.append(int(np.argpartition(scores, -1)[-1]))
print(json.dumps(answers))
"""


def write_photo_crops(root: Path, per_class: int = 200, seed: int = 0) -> Path:
    """Class folders of non-square JPEG crops (160..420 px a side) of the halves of two real photos."""
    from PIL import Image

    from tests.support.helpers import sample_photos

    rng = np.random.default_rng(seed)
    for name, data in sample_photos().items():
        photo = Image.open(io.BytesIO(data)).convert("RGB")
        for folder, left, right in ((f"{name}_left", 0, photo.width // 2), (f"{name}_right", photo.width // 2, photo.width)):
            (root / folder).mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                w = int(rng.integers(120, right - left))
                h = int(rng.integers(120, photo.height))
                x, y = left + int(rng.integers(0, right - left - w + 1)), int(rng.integers(0, photo.height - h + 1))
                crop = photo.crop((x, y, x + w, y + h))
                # Saved at its own aspect, its sides between 160 and 420 px.
                side = int(rng.integers(160, 421))
                factor = side / max(w, h)
                size = (max(160, round(w * factor)), max(160, round(h * factor)))
                crop = crop.resize(size, Image.BILINEAR)
                if rng.random() < 0.5:
                    crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
                pixels = np.clip(np.asarray(crop, np.float32) * rng.uniform(0.7, 1.2), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(root / folder / f"IMG_{i:04d}.jpg", quality=int(rng.integers(80, 96)))
    return root


def pipeline(*args) -> None:
    done = subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"pipeline {args[0]} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")


def build_env(script: str, venv: Path) -> Path:
    done = subprocess.run(["bash", str(REPO / ".ci" / script), "--make", str(venv)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f".ci/{script} failed: {done.stderr[-2000:]}")
    return venv / "bin" / "python"


def heldout(run: Path, tmp: Path):
    """The held-out files as parity scored them (its bundle: originals byte for byte), with their labels."""
    bundle = tmp / "bundle"
    pipeline("parity", run, "--bundle", bundle)
    entries = json.loads((bundle / "bundle.json").read_text())
    return [bundle / e["file"] for e in entries["images"]], [e["label"] for e in entries["images"]]


def answers_by_feed(model: Path, images, feed, ties: dict, label: str) -> list:
    """argmax answers of the int8 model fed by `feed`; ties[label]: how many images have a tie at the top."""
    from edge.model.interpreter import make_interpreter

    interpreter = make_interpreter(model)
    details, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    answers, tied = [], 0
    for image in images:
        interpreter.set_tensor(details["index"], feed(image, details))
        interpreter.invoke()
        scores = interpreter.get_tensor(out["index"])[0].astype(np.int64)
        answers.append(int(np.argmax(scores)))
        tied += int((scores == scores.max()).sum() > 1)
    ties[label] = tied
    return answers


def run_in(python: Path, driver: str, model: Path, images, extra_env=None, *args) -> list:
    env = dict(os.environ, **(extra_env or {}))
    done = subprocess.run([str(python), "-c", driver, *args, model.name, *map(str, images)], capture_output=True,
                          text=True, cwd=model.parent, env=env)
    if done.returncode != 0:
        sys.exit(f"{python} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(name: str, run: Path, tmp: Path, envs: dict) -> dict:
    from edge.clients import feeds as clients
    from edge.pixels.contract import PixelContract

    images, labels = heldout(run, tmp)
    alone = tmp / "alone"
    alone.mkdir()
    model = alone / "model_int8.tflite"
    shutil.copy(run / "model_int8.tflite", model)
    contract = PixelContract.from_record(json.loads((run / "model_int8.tflite.json").read_text())["preprocessing"], "sidecar")
    parity = json.loads((run / "parity" / "report.json").read_text())["models"]["int8_cpu"]["top1"]

    feeds = {
        "edgeflow contract (edge.clients.feeds.edgeflow)": lambda p, d: clients.edgeflow(p, d, contract),
        "pycoral classify_image.py, reproduced": clients.pycoral_classify,
        "MediaPipe ImageClassifier, reproduced": clients.mediapipe_classify,
        "pycoral detect_image.py letterbox (top-left), reproduced": lambda p, d: clients.pycoral_detect(p, d).tensor,
        "Frigate whole-frame region (its calculate_region: frame on top or left, black beyond), approximate": clients.frigate_detect,
    }
    ties = {}
    rows = {label: answers_by_feed(model, images, feed, ties, label) for label, feed in feeds.items()}
    rows["pycoral classify_image.py, reproduced in the device env"] = run_in(
        envs["device"], _REPRODUCED_ON_DEVICE, model, images, {"PYTHONPATH": str(REPO)})
    real = {
        "pycoral classify_image.py, real (Python 3.9, tflite-runtime)": run_in(
            envs["device"], _PYCORAL_DRIVER, model, images, {"PYTHONPATH": str(PYCORAL)}, str(PYCORAL / "classify_image.py")),
        "MediaPipe ImageClassifier 1.2.2, real": run_in(envs["mediapipe"], _MEDIAPIPE_DRIVER, model, images),
    }
    twins = [("pycoral classify_image.py, real (Python 3.9, tflite-runtime)", "pycoral classify_image.py, reproduced"),
             ("pycoral classify_image.py, real (Python 3.9, tflite-runtime)",
              "pycoral classify_image.py, reproduced in the device env"),
             ("MediaPipe ImageClassifier 1.2.2, real", "MediaPipe ImageClassifier, reproduced")]
    accuracy = {label: float(np.mean(np.asarray(a) == np.asarray(labels))) for label, a in {**rows, **real}.items()}
    same = [(a, b, int(sum(x == y for x, y in zip(real[a], rows[b])))) for a, b in twins]
    return {"name": name, "images": len(images), "parity": parity, "accuracy": accuracy, "same": same, "ties": ties}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device-python", type=Path, help="python of a .ci/edge-env venv (default: build one)")
    parser.add_argument("--mediapipe-python", type=Path, help="python of a .ci/mediapipe-env venv (default: build one)")
    parser.add_argument("--digits", action="store_true", help="also `pipeline run`'s digits model")
    parser.add_argument("--epochs", type=int, default=10, help="training epochs of each photo model (default 10)")
    parser.add_argument("--client-fits", choices=("off", "on", "both"), default="off",
                        help="train without, with, or both without and with `pipeline train --client-fits`")
    parser.add_argument("--image-size", type=int, action="append",
                        help="a photo model's input size; repeat for several models (default 48)")
    parser.add_argument("--model", default="small_cnn", help="the photo models' architecture (default small_cnn)")
    parser.add_argument("--alpha", type=float, help="the photo models' width multiplier (mobilenet_v2 only)")
    parser.add_argument("--run", type=Path, help="measure this run's int8 model (exported) instead of training")
    parser.add_argument("--camera", action="store_true",
                        help="the tests' camera-size photos (640x480 JPEG crops, 200 per class) instead of the 160-420 px crops")
    args = parser.parse_args()
    if args.run and (args.image_size or args.digits or args.camera):
        parser.error("--run measures an existing run; it takes no --image-size, --digits or --camera")
    args.image_size = args.image_size or ([] if args.run else [48])

    import PIL
    import tensorflow as tf

    results = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        envs = {"device": args.device_python or build_env("edge-env", tmp / "device"),
                "mediapipe": args.mediapipe_python or build_env("mediapipe-env", tmp / "mediapipe")}
        if args.run:
            (tmp / "mrun").mkdir()
            results.append(measure(f"the run {args.run}", args.run.resolve(), tmp / "mrun", envs))  # no training
        elif args.camera:
            from tests.support.helpers import write_camera_jpegs

            data = write_camera_jpegs(tmp / "photos", per_class=200, halves=True)
        else:
            data = write_photo_crops(tmp / "photos")
        kind = "camera-size JPEG crops 640x480" if args.camera else "non-square JPEG crops 160-420 px"
        fits = {"off": [False], "on": [True], "both": [False, True]}[args.client_fits]
        described = "small CNN" if args.model == "small_cnn" else \
            f"{args.model}{f' alpha {args.alpha:g}' if args.alpha else ''}"
        for size in args.image_size:
            for fit in fits:
                run = tmp / f"run{size}{'fits' if fit else ''}"
                pipeline("train", "--data", data, "--out", run, "--model", args.model, "--image-size", size,
                         *(["--alpha", args.alpha] if args.alpha else []), "--epochs", args.epochs,
                         "--batch-size", "16", *(["--client-fits"] if fit else []))
                pipeline("export", run, "--int8")
                pipeline("parity", run, "--max-drop", "100", "--min-agreement", "0")
                (tmp / f"m{run.name}").mkdir()
                results.append(measure(f"photos: 4 classes, {kind}, {described} {size}x{size}, "
                                       f"{args.epochs} epochs{', trained with --client-fits' if fit else ''}", run,
                                       tmp / f"m{run.name}", envs))
        if args.digits:
            for fit in fits:
                digits = tmp / f"digits{'fits' if fit else ''}"
                # `pipeline run`'s stages, one by one, so that training can take --client-fits.
                pipeline("train", "--data", "digits", "--out", digits, *(["--client-fits"] if fit else []))
                pipeline("export", digits, "--int8")
                pipeline("parity", digits, "--max-drop", "100", "--min-agreement", "0")
                (tmp / f"m{digits.name}").mkdir()
                results.append(measure("digits: `pipeline run`'s model (10 classes, 8x8 PNGs, small CNN 32x32)"
                                       f"{', trained with --client-fits' if fit else ''}", digits, tmp / f"m{digits.name}", envs))

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "cpu") if Path("/proc/cpuinfo").exists() else "cpu"
    command = " ".join(["bench/clients/classify.py", *(["--digits"] if args.digits else []),
                        *[f"--image-size {size}" for size in args.image_size],
                        *([f"--model {args.model}"] if args.model != "small_cnn" else []),
                        *([f"--alpha {args.alpha:g}"] if args.alpha else []),
                        *(["--camera"] if args.camera else []),
                        *([f"--epochs {args.epochs}"] if args.epochs != 10 else []),
                        *([f"--client-fits {args.client_fits}"] if args.client_fits != "off" else [])])
    print("# The int8 model as each client feeds it\n")
    print(f"Command: `.venv/bin/python {command} > bench/results/clients.md` (environments built by .ci/edge-env and "
          ".ci/mediapipe-env)\n")
    print(f"Machine: {platform.machine()}, {cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, "
          f"TensorFlow {tf.__version__}, Pillow {PIL.__version__}. No timing: only training's randomness and the "
          "libraries move these numbers.\n")
    print("Same model file, same held-out files (parity's bundle, byte for byte); only the preprocessing differs. "
          "\"reproduced\" rows feed the int8 model in this process the tensor edge.clients.feeds computes for that client; "
          "\"real\" rows run the client itself on the .tflite alone. A tie between two classes' uint8 scores is "
          "answered by argmax (the first class) in the in-process rows, by pycoral's argpartition in pycoral's.\n")
    for r in results:
        print(f"## {r['name']}\n")
        print(f"{r['images']} held-out images; `pipeline parity` int8 top-1 {r['parity']:.3f}.\n")
        print("| feed | top-1 | vs parity (pp) | images with a tie at the top |")
        print("|---|---|---|---|")
        for label, acc in r["accuracy"].items():
            print(f"| {label} | {acc:.3f} | {100 * (acc - r['parity']):+.1f} | {r['ties'].get(label, '')} |")
        print()
        for real, twin, same in r["same"]:
            print(f"- {real} and \"{twin}\" give the same answer on {same}/{r['images']} images.")
        print()


if __name__ == "__main__":
    main()
