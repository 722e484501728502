"""The int8 detector file alone, in other people's programs: do they find what `edge detect` finds?

The session's shapes detector (`pipeline train --task detect`, exported by `pipeline export --int8`:
tests/support/detect_trained.py) has its int8 file copied alone into an empty folder (no sidecar, no manifest, no labels
file). On the held-out images (PNG, 128x128: the model's own size, so every client's resize leaves the pixels as
they are and only the reading of the outputs differs):
  - `edge detect --json` in the Python 3.9 device environment (.ci/edge-env) is the reference;
  - pycoral's own examples/detect_image.py (../shared/reference/pycoral), run as a program in the device
    environment with its defaults (threshold 0.4), reading the outputs by the model's signature names;
  - Frigate's Edge TPU plugin's SSD reading (model_type ssd), reproduced with its index logic in
    edge.clients.feeds.frigate_ssd_read (by shape at start-up, then by position), on tflite_runtime as Frigate runs it;
  - MediaPipe's ObjectDetector (PyPI mediapipe 1.2.2, .ci/mediapipe-env), which needs the metadata's four
    output descriptions and names the classes from the packed label file.
Each must find the same objects: same class, IoU >= 0.9. Objects scoring within MARGIN of the 0.4 threshold
may be on either side of it for one runtime and not another, so each side's objects are matched only when they
score at least 0.4 + MARGIN. Likewise two overlapping candidates whose scores are within NEAR_TIE of each other
are a near tie for the op's NMS, which keeps one: pixels a grey level apart (Pillow 13 on the host, 11.3 in the
device environment) may keep the other, so an object is also matched by the other side's winner of that tie.
pycoral and MediaPipe give whole pixels (pycoral truncates each coordinate, MediaPipe the origin and the size):
`edge detect`'s boxes are rounded the same way before the IoU, since on a 20-pixel object truncation alone moves
the IoU below 0.9.

Then `pipeline parity`'s client rows (pipeline/inference/client_scores.detect_clients, the function parity scores
them with) on the same files and on 16:9 copies of them (each picture stretched to 228x128, so a stretching client
gets back the square picture the detector learned from and pycoral's letterbox does not): the objects of each
row are, image by image, what the real client prints, within the same tolerance. Frigate does not run here
(it is a whole NVR), so its row has no real client to be checked against. On the 16:9 copies the letterbox row
loses more than the int8 row, and --clients pycoral then fails the gate (pipeline.parity.judge with the detect task's side, the verdict parity writes).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.tasks.detect.heads.ssd.postprocess import Settings
from tests.support import detect_drivers, device_env
from tests.support.detect_trained import trained_once
from tests.support.helpers import REPO, quiet_env

pytestmark = [pytest.mark.host, pytest.mark.slow]

PYCORAL = REPO.parent / "shared" / "reference" / "pycoral"
THRESHOLD = 0.4  # pycoral's detect_image.py default and Frigate's fixed min_score
MARGIN = 0.05
MIN_IOU = 0.9
NEAR_TIE = 0.02  # scores this close: which of two overlapping candidates NMS keeps is a grey level's decision
NMS_IOU = Settings().iou_threshold  # the op's, as the session's detector was exported (checked in `setup`)

# Frigate's reading on tflite_runtime (the interpreter its plugin imports first), fed as its SSD path feeds a
# whole frame's region (edge.clients.feeds.frigate_detect; the region is the whole square image here).
_FRIGATE_DRIVER = r"""
import json, sys
from PIL import Image
from tflite_runtime.interpreter import Interpreter
from edge import clients
interpreter = Interpreter(model_path=sys.argv[1])
interpreter.allocate_tensors()
details = interpreter.get_input_details()[0]
answers = []
for path in sys.argv[2:]:
    width, height = Image.open(path).size
    x1, y1, x2, y2 = clients.frigate_frame_region(width, height, (details["shape"][2], details["shape"][1]))
    interpreter.set_tensor(details["index"], clients.frigate_detect(path, details))
    interpreter.invoke()
    side = y2 - y1
    found = [{"id": int(r[0]), "score": float(r[1]),
              "box": [x1 + r[3] * side, y1 + r[2] * side, x1 + r[5] * side, y1 + r[4] * side]}
             for r in clients.frigate_ssd_read(interpreter) if r[1] > 0]
    answers.append(found)
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory, session_folder):
    """The two environments (shared by the test session), the session's detector, and its int8 file alone in an
    empty folder."""
    root = tmp_path_factory.mktemp("clients")
    device, mediapipe = (device_env.shared_env(tmp_path_factory, script) for script in ("edge-env", "mediapipe-env"))
    trained = trained_once(session_folder, keras=False)
    assert trained.settings.iou_threshold == NMS_IOU
    alone = root / "alone"
    alone.mkdir()
    model = alone / "detector_int8.tflite"
    shutil.copy(trained.int8, model)
    assert sorted(p.name for p in alone.iterdir()) == ["detector_int8.tflite"]
    wide = _wide_copies(trained.files, root / "wide")
    return SimpleNamespace(model=model, files=[str(f) for f in trained.files], labels=trained.labels, root=root,
                           device=device / "bin", mediapipe=mediapipe / "bin" / "python",
                           heldout=trained.heldout, float=trained.float, wide=[str(f) for f in wide])


WIDE = (228, 128)  # 16:9


def _wide_copies(files, folder: Path):
    """Each held-out PNG stretched to 16:9 (LANCZOS): its boxes, normalized, stay where they were."""
    from PIL import Image

    folder.mkdir()
    out = []
    for f in files:
        path = folder / Path(f).name
        with Image.open(f) as image:
            image.convert("RGB").resize(WIDE, Image.LANCZOS).save(path)
        out.append(path)
    return out


def _run(args, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, cwd=cwd, env=quiet_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def reference(setup):
    """`edge detect --json` in the device environment: the objects of each held-out image, in pixels."""
    out = setup.root / "edge.json"
    _run([setup.device / "edge", "detect", setup.model, *setup.files, "--threshold", str(THRESHOLD), "--json", out], setup.model.parent)
    doc = json.loads(out.read_text())
    assert doc["errors"] == [] and len(doc["images"]) == len(setup.files)
    found = [[{"id": o["id"], "label": o["label"], "score": o["score"],
               "box": [o["box"][k] for k in ("xmin", "ymin", "xmax", "ymax")]} for o in image["objects"]]
             for image in doc["images"]]
    assert sum(len(f) for f in found) >= 5, "the trained detector finds too few objects for the comparison to mean anything"
    return found


def _iou(a, b) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _pycoral_pixels(box):
    return [int(v) for v in box]  # BBox(...).scale(sx, sy).map(int)


def _mediapipe_pixels(box):
    x, y = int(box[0]), int(box[1])  # origin_x, origin_y, width, height, each truncated
    return [x, y, x + int(box[2] - box[0]), y + int(box[3] - box[1])]


def _same_objects(name: str, reference, answers, rounding=None) -> int:
    """Every object scoring >= THRESHOLD + MARGIN on one side has one on the other: same class, IoU >= MIN_IOU
    (`edge detect`'s boxes first rounded as the client rounds its own)."""
    assert len(answers) == len(reference), f"{name}: {len(answers)} answers for {len(reference)} images"
    if rounding is not None:
        reference = [[{**o, "box": rounding(o["box"])} for o in image] for image in reference]
    matched = 0
    for n, (ours, theirs) in enumerate(zip(reference, answers)):
        for side, wanted, among in (("edge detect", ours, theirs), (name, theirs, ours)):
            for obj in (o for o in wanted if o["score"] >= THRESHOLD + MARGIN):
                best = max((_iou(obj["box"], o["box"]) for o in among if o["id"] == obj["id"]), default=0.0)
                assert best >= MIN_IOU or _near_tie(obj, among), (
                    f"image {n}: {side} finds class {obj['id']} at {obj['box']} (score {obj['score']:.3f}); "
                    f"the other finds {among} (best IoU {best:.3f})")
                matched += side == "edge detect" and best >= MIN_IOU
    return matched


def _near_tie(obj, among) -> bool:
    """The other side kept a candidate that this object's NMS would have weighed against it (the op's NMS is
    class-agnostic: IoU above its threshold), scoring within NEAR_TIE of it."""
    return any(_iou(obj["box"], o["box"]) > NMS_IOU and abs(o["score"] - obj["score"]) <= NEAR_TIE for o in among)


@pytest.fixture(scope="module")
def pycoral_printed(setup):
    """What pycoral's own detect_image.py prints for each held-out file, then for each 16:9 copy."""
    driver = setup.root / "pycoral_driver.py"
    driver.write_text(detect_drivers.PYCORAL)
    env_python = setup.device / "python"
    done = subprocess.run([str(env_python), str(driver), str(PYCORAL / "detect_image.py"), str(setup.model), "", *setup.files,
                           *setup.wide], capture_output=True, text=True, timeout=900, cwd=setup.model.parent,
                          env=quiet_env(PYTHONPATH=str(PYCORAL)))
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    return answers[:len(setup.files)], answers[len(setup.files):]


@pytest.fixture(scope="module")
def mediapipe_printed(setup):
    """What MediaPipe's ObjectDetector finds (score >= 0.4) in each held-out file, then in each 16:9 copy; ids from names."""
    driver = setup.root / "mediapipe_driver.py"
    driver.write_text(detect_drivers.MEDIAPIPE)
    answers = json.loads(_run([setup.mediapipe, driver, setup.model, THRESHOLD, *setup.files, *setup.wide],
                              setup.model.parent).strip().splitlines()[-1])
    names = {o["label"] for image in answers for o in image}
    assert names and names <= set(setup.labels), names  # class names from the packed label file
    for image in answers:
        for o in image:  # MediaPipe gives the name (its index is None when a label file names the class)
            assert o["id"] is None or o["label"] == setup.labels[o["id"]]
            o["id"] = setup.labels.index(o["label"])
    return answers[:len(setup.files)], answers[len(setup.files):]


def test_pycoral_detect_image_finds_what_edge_detect_finds(reference, pycoral_printed):
    matched = _same_objects("pycoral detect_image.py", reference, pycoral_printed[0], _pycoral_pixels)
    assert matched >= 5


def test_frigate_ssd_reading_finds_what_edge_detect_finds(setup, reference):
    driver = setup.root / "frigate_driver.py"
    driver.write_text(_FRIGATE_DRIVER)
    answers = json.loads(_run([setup.device / "python", driver, setup.model, *setup.files], setup.model.parent).strip().splitlines()[-1])
    assert _same_objects("Frigate (edgetpu plugin, ssd)", reference, answers) >= 5


def test_mediapipe_object_detector_finds_and_names_what_edge_detect_finds(reference, mediapipe_printed):
    assert _same_objects("MediaPipe ObjectDetector", reference, mediapipe_printed[0], _mediapipe_pixels) >= 5


@pytest.fixture(scope="module")
def client_rows(setup):
    """Parity's client rows for the int8 file alone: each client's objects on each held-out file and 16:9 copy,
    from client_scores.detect_clients on a detector opened as parity opens the run's int8 model."""
    from edge.answers.detect import open_detector
    from pipeline.inference.client_scores import detect_clients

    detector = open_detector(setup.model)
    square, refused = detect_clients(detector, [Path(f).read_bytes() for f in setup.files])
    wide, refused_wide = detect_clients(detector, [Path(f).read_bytes() for f in setup.wide])
    assert refused == refused_wide == {}
    return detector, square, wide


def _as_printed(found, files):
    """A row's detections (boxes normalized to the picture) as a client prints them: pixels of that picture."""
    from PIL import Image

    answers = []
    for d, f in zip(found, files):
        with Image.open(f) as image:
            width, height = image.size
        answers.append([{"id": int(c), "score": float(s),
                         "box": [round(float(v) * side, 3) for v, side in zip((b[1], b[0], b[3], b[2]), (width, height, width, height))]}
                        for b, c, s in zip(d.boxes, d.classes, d.scores)])
    return answers


@pytest.mark.parametrize("client", ["pycoral", "mediapipe"])
def test_parity_client_row_finds_what_the_real_client_prints(setup, client_rows, pycoral_printed, mediapipe_printed, client):
    _, square, wide = client_rows
    printed = {"pycoral": pycoral_printed, "mediapipe": mediapipe_printed}[client]
    for found, files, answers in ((square, setup.files, printed[0]), (wide, setup.wide, printed[1])):
        # Both sides are whole pixels already: the row's boxes are the client's own, mapped back as it maps them.
        assert _same_objects(f"{client} (real)", _as_printed(found[client], files), answers) >= 5


def test_on_16_9_pictures_the_letterbox_row_loses_more_and_gating_it_fails(setup, client_rows):
    """The detector learned square pictures; the 16:9 copies are those pictures stretched, so a client that stretches
    them back feeds what it learned, and pycoral's letterbox feeds objects at 56% of their size, widened. The int8
    row and parity's client rows scored against the float twin's detections (the reference here) by the gate."""
    from edge.answers.detect import open_detector
    from pipeline import gate, parity
    from pipeline.tasks.detect import scores as detect_scores
    from pipeline.tasks.comparison import Held
    from pipeline.tasks.detect.parity import DetectComparison

    detector, _, wide = client_rows
    examples = [e._replace(image=Path(f).read_bytes(), width=WIDE[0], height=WIDE[1]) for e, f in zip(setup.heldout, setup.wide)]
    twin = open_detector(setup.float)
    pixels = [twin.runner.pixels(e.image, e.id) for e in examples]  # the pixel contract: stretched to the input
    predictions = {gate.REFERENCE: detect_scores.detections(twin, pixels, [e.id for e in examples]),
                   "int8_cpu": detect_scores.detections(detector, pixels, [e.id for e in examples])}
    models = {name: detect_scores.scored_entry(examples, found, predictions[gate.REFERENCE], setup.labels)
              for name, found in predictions.items()}
    reference = predictions[gate.REFERENCE]
    side = DetectComparison()
    held = Held([e.id for e in examples], [e.image for e in examples], pixels, examples, "16:9 copies", setup.labels)

    def judge(named, max_drop):
        clients = side.client_rows(held, wide, {}, models, reference, named)
        verdict = parity.judge(side, held, gate.GateLimits(max_drop, 0.0, "map50"), models, clients, {}, named)
        return SimpleNamespace(clients=clients, failures=verdict.failures, gate=verdict.gate)

    rows = judge((), 100.0).clients
    int8_drop = (models[gate.REFERENCE]["map50"] - models["int8_cpu"]["map50"]) * 100
    assert rows["edgeflow"]["map50"] == pytest.approx(models["int8_cpu"]["map50"], abs=0.005)  # the int8 row's own feed
    assert rows["pycoral"]["drop_pp"] > int8_drop + 5, {n: r["map50"] for n, r in rows.items()}
    limit = (int8_drop + rows["pycoral"]["drop_pp"]) / 2
    reported = judge((), limit)
    assert reported.failures == [] and reported.gate["applies_to"] == ["int8_cpu"]
    gated = judge(("pycoral",), limit)
    assert [f.split(":")[0] for f in gated.failures] == ["client_pycoral"], gated.failures
    assert "client_pycoral: mAP@.5 drop" in gated.failures[0] and gated.gate["passed"] is False
    assert gated.clients["pycoral"]["gated"] is True and "client_pycoral" in gated.gate["applies_to"]


def test_frigate_region_and_way_back_follow_its_calculate_region_and_detect():
    """Frigate cannot run here: its row's region and box mapping, checked against values worked by hand from
    calculate_region (side rounded down to 4, at least the model's, centred, moved back inside the frame) and
    detect (offset added, far corner bounded by the frame's last pixel, objects starting past it dropped)."""
    import numpy as np

    from edge.clients import feeds as clients

    assert clients.frigate_frame_region(228, 128, (128, 128)) == (0, 0, 228, 228)  # a 16:9 frame at the square's top
    assert clients.frigate_frame_region(230, 130, (128, 128)) == (1, 0, 229, 228)  # 230 -> 228, centred: x 1
    assert clients.frigate_frame_region(100, 60, (320, 320)) == (0, 0, 320, 320)  # never under the model's size
    assert clients.frigate_min_region((300, 300)) == 300 and clients.frigate_min_region((130, 130)) == 132
    boxes, kept = clients.frigate_boxes(np.array([[0.5, 0.1, 0.6, 0.2], [0.6, 0.1, 0.7, 0.2]], np.float32),
                                        (0, 0, 228, 228), (228, 128))
    assert boxes[0].tolist() == [22, 114, 45, 127] and kept.tolist() == [True, False]
