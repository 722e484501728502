"""The real detection clients run as programs, each printing one JSON line: per image, the objects it found as
{"id", "score", "box": [xmin, ymin, xmax, ymax] in the picture's pixels} (MediaPipe adds "label"). Shared by
tests/pipeline/tasks/detect/test_clients.py and bench/clients/detect.py; each driver is written to a file and run with the
client's own Python (the device environment for pycoral, the MediaPipe environment for MediaPipe).
"""

# pycoral's detect_image.py run as a program (runpy, as `python detect_image.py -m MODEL -i IMAGE` does), once per
# image; its RESULTS section prints, per object, the id (no labels file), "  id: ", "  score: ", "  bbox: BBox(...)".
# Arguments: detect_image.py, the model, the score threshold ("" for detect_image.py's own default), the images.
PYCORAL = r"""
import contextlib, io, json, re, runpy, sys
script, model, threshold, images = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
answers = []
for image in images:
    sys.argv = [script, "-m", model, "-i", image, "-c", "1", *(["-t", threshold] if threshold else [])]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(script, run_name="__main__")
    text = out.getvalue().split("-------RESULTS--------", 1)[1]
    found = []
    for cls, score, box in re.findall(r"id:\s+(\d+)\s+score:\s+([0-9.eE+-]+)\s+bbox:\s+BBox\(([^)]*)\)", text):
        b = dict(kv.split("=") for kv in box.replace(" ", "").split(","))
        found.append({"id": int(cls), "score": float(score), "box": [float(b[k]) for k in ("xmin", "ymin", "xmax", "ymax")]})
    answers.append(found)
print(json.dumps(answers))
"""

# MediaPipe's ObjectDetector. Arguments: the model, the score threshold, the images. "id" is MediaPipe's category
# index, None when a label file names the class; "label" its category name.
MEDIAPIPE = r"""
import json, sys
import mediapipe as mp
from mediapipe.tasks.python import vision
from mediapipe.tasks.python.core.base_options import BaseOptions
options = vision.ObjectDetectorOptions(base_options=BaseOptions(model_asset_path=sys.argv[1]), score_threshold=float(sys.argv[2]))
answers = []
with vision.ObjectDetector.create_from_options(options) as detector:
    for path in sys.argv[3:]:
        found = []
        for d in detector.detect(mp.Image.create_from_file(path)).detections:
            b, c = d.bounding_box, d.categories[0]
            found.append({"id": c.index, "label": c.category_name, "score": c.score,
                          "box": [b.origin_x, b.origin_y, b.origin_x + b.width, b.origin_y + b.height]})
        answers.append(found)
print(json.dumps(answers))
"""
