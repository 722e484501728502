"""`pipeline predict` of a pose run: every object the exported pose model finds in unlabeled images, written in COCO's
keypoint results form (a JSON list, one row per object: image_id, file_name, category_id, category, bbox [x, y, width,
height] and keypoints [x1, y1, s1, ..., xK, yK, sK] in the image's pixels, each keypoint's score in the place of its
visibility, and the object's score), the form COCOeval's loadRes reads with iouType "keypoints".

--model float runs the float TFLite twin, int8 and edgetpu the exported int8 files: each through the device's own
reading (edge.answers.detect, which reads a pose model's keypoints too), as detection's predict runs them. Every pose
the decoding keeps is written, whatever its score (an mAP needs the low-scoring ones too). image_id is the input's
position; category_id is the class's index + 1, as this project writes COCO categories.
"""
from __future__ import annotations


def predict(config, run, say, progress):
    from pipeline.tasks.detect import predict as detection

    return detection.predict(config, run, say, progress, fields=keypoints, form="coco keypoint results json",
                              what="pose")


def keypoints(found) -> dict:
    """An object's keypoints as COCO's results list them: x, y in the image's pixels and the keypoint's score."""
    return {"keypoints": [round(float(v), 4 if n % 3 == 2 else 2)
                          for n, v in enumerate(c for point in found.keypoints for c in point)]}
