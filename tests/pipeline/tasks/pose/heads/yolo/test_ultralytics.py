"""The pose model in Ultralytics' layout (pipeline/tasks/pose/heads/yolo/ultralytics.py), read by Ultralytics' own
`YOLO(file, task="pose")` in the venv .ci/ultralytics-env builds (or EDGEFLOW_ULTRALYTICS_PYTHON): the tiny trained
model's boxes, scores and keypoints as Ultralytics reads them against edgeflow's decoding of the float model; and the
pre-flight's account of the file: everything up to the box distributions' softmax on the Edge TPU."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

pytestmark = [pytest.mark.host, pytest.mark.slow]

tf = pytest.importorskip("tensorflow")

from tests.support.pose_trained import SIZE, tiny_items, trained  # noqa: E402

READ = """
import json, sys
from ultralytics import YOLO
model = YOLO(sys.argv[1], task="pose")
found = []
for path in sys.argv[2:]:
    r = model.predict(path, imgsz=int(%d), conf=0.25, verbose=False)[0]
    found.append({"boxes": r.boxes.xyxy.tolist(), "scores": r.boxes.conf.tolist(), "classes": r.boxes.cls.tolist(),
                  "keypoints": r.keypoints.data.tolist(), "names": r.names})
print(json.dumps(found))
""" % SIZE


@pytest.fixture(scope="module")
def ultralytics_python(tmp_path_factory) -> str:
    from tests.support.device_env import shared_env

    given = os.environ.get("EDGEFLOW_ULTRALYTICS_PYTHON")
    return given or str(shared_env(tmp_path_factory, "ultralytics-env") / "bin" / "python")


def test_ultralytics_reads_the_pose_file_as_edgeflow_decodes_the_model(ultralytics_python, tmp_path):
    from PIL import Image

    from pipeline.edgetpu import preflight
    from pipeline.tasks.pose.heads.yolo.infer import decode
    from pipeline.tasks.pose.heads.yolo.ultralytics import convert

    model = trained()[0]
    pixels = [item["image"] for item in tiny_items()]
    data = convert(model, SIZE, ["square"], calibration=pixels)
    found = preflight.analyze(data)
    assert found.first_fallback is not None and found.first_fallback.op == "SOFTMAX", found.headline()
    before = [row for row in found.rows if row.index < found.first_fallback.index]
    assert before and all(row.on_edgetpu for row in before), found.headline()
    path = tmp_path / "pose_ultralytics.tflite"
    path.write_bytes(data)
    images = []
    for n, image in enumerate(pixels):
        images.append(tmp_path / f"{n}.png")
        Image.fromarray(image).save(images[-1])
    done = subprocess.run([ultralytics_python, "-c", READ, str(path), *map(str, images)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    # Each object Ultralytics reports is one anchor point of the float model as edgeflow decodes it (scores tie on the
    # int8 grid, so which of an object's points comes first is the reader's choice): box and keypoints within 1.5 px,
    # score and keypoint scores within 0.02.
    out = model(np.stack(pixels).astype(np.float32), training=False)
    boxes, scores, points = (t.numpy() for t in decode(out["box_dist"], out["class_logits"], out["keypoints"], SIZE))
    for theirs, ours_boxes, ours_scores, ours_points in zip(read, boxes, scores, points):
        assert theirs["names"] == {"0": "square"} and len(theirs["scores"]) >= 1 and set(theirs["classes"]) == {0.0}
        for box, score, keypoints in list(zip(theirs["boxes"], theirs["scores"], theirs["keypoints"]))[:3]:
            keypoints = np.array(keypoints)
            theirs_xy = np.concatenate([np.array(box), keypoints[:, :2].ravel()])
            ours_xy = np.concatenate([ours_boxes[:, [1, 0, 3, 2]], ours_points[..., :2].reshape(len(ours_points), -1)], 1)
            distance = np.abs(ours_xy * SIZE - theirs_xy).max(axis=1)
            at = int(np.argmin(distance))
            assert distance[at] < 1.5, (distance[at], box, keypoints)
            assert abs(score - ours_scores[at, 0]) < 0.02
            np.testing.assert_allclose(keypoints[:, 2], ours_points[at, :, 2], atol=0.02)
