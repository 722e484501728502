"""`pipeline predict` of a pose run: every object the exported pose model finds in unlabeled images, written in COCO's
keypoint results form (a JSON list, one row per object: image_id, file_name, category_id, category, bbox [x, y, width,
height] and keypoints [x1, y1, s1, ..., xK, yK, sK] in the image's pixels, each keypoint's score in the place of its
visibility, and the object's score), the form COCOeval's loadRes reads with iouType "keypoints".

--model float runs the float TFLite twin, int8 and edgetpu the exported int8 files: each through the device's own
reading (edge.answers.pose), one image at a time. Every pose the decoding keeps is written, whatever its score (an mAP
needs the low-scoring ones too). image_id is the input's position; category_id is the class's index + 1, as this project
writes COCO categories.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List

from pipeline.errors import ConfigError, DataError
from pipeline.tasks.detect.predict import MODELS, Predicted, _check


def predict(config, run, say, progress):
    from pipeline.rundir.run import artifact

    _check(config)
    key = MODELS[config.model]
    if not run.has(key):
        raise ConfigError(f"{run.dir} has no {key}; run `{artifact(key).producer}` first (a pose run predicts with its "
                          "exported model)")
    if config.model == "edgetpu":
        run.check_compiled_is_current(key)
    from edge.answers.pose import open_pose, poses_file
    from pipeline.data import unlabeled
    from pipeline.rundir.files import write_json_atomic

    path = run.artifact(key)  # checks its sha256
    inputs = unlabeled.open_inputs(config.data)
    problems: Dict[int, str] = dict(inputs.problems)
    inputs.refuse_unless_skipping(problems, config.skip_bad)
    started = time.perf_counter()
    model = open_pose(path, edgetpu=config.model == "edgetpu", threads=config.threads)
    loaded = time.perf_counter()
    rows: List[dict] = []
    found_in = set()
    keep = inputs.kept(problems)
    with progress(int(keep.sum()), "finding poses") as update:
        for position, encoded in inputs.encoded(keep):
            item = inputs.items[position]
            try:
                found = poses_file(model, encoded, threshold=0.0, name=item.name)
            except DataError as err:
                problems[position] = str(err)
            else:
                found_in.add(position)
                for o in found:
                    b = o.box
                    rows.append({"image_id": position, "file_name": item.id, "category_id": o.id + 1, "category": o.label,
                                 "bbox": [round(float(b.xmin), 2), round(float(b.ymin), 2), round(float(b.xmax - b.xmin), 2),
                                          round(float(b.ymax - b.ymin), 2)],
                                 "keypoints": [round(float(v), 4 if n % 3 == 2 else 2)
                                               for n, v in enumerate(c for point in o.keypoints for c in point)],
                                 "score": round(float(o.score), 6)})
            update(1)
    inputs.refuse_unless_skipping(problems, config.skip_bad)
    if not found_in:
        raise DataError(f"every one of the {len(inputs.items)} inputs was left out (--skip-bad); nothing to write")
    seconds = time.perf_counter() - loaded
    out = Path(config.out)
    write_json_atomic(out, rows, indent=1)
    skipped = [problems[i] for i in sorted(problems)]
    return Predicted(out, "coco keypoint results json", len(found_in), skipped, loaded - started, seconds,
                     f"{path.name} ({config.model}), one image at a time, {len(rows)} objects; images decoded by the "
                     "pixel contract (edge.pixels.preprocess), as the device decodes")
