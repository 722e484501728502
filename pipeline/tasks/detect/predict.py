"""`pipeline predict` of a detection run: every object the exported detector finds in unlabeled images, written as
COCO's results format (a JSON list, one row per object: image_id, file_name, category_id, category, bbox
[x, y, width, height] in the image's pixels, score), the form COCOeval's loadRes and COCO tooling read.

--model float runs the float TFLite twin (the SavedModel with the same post-processing op, so the same boxes),
int8 and edgetpu the exported int8 files: each through the device's own reading (edge.answers.detect), one image at a
time. Every detection the op keeps is written, whatever its score: an mAP needs the low-scoring ones too, and a
reader can drop them by score. image_id is the input's position; category_id is the class's index + 1, as this
project writes COCO categories (COCO reserves 0).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, NamedTuple

from pipeline.errors import ConfigError, DataError

MODELS = {"float": "model_float", "int8": "model_int8", "edgetpu": "model_int8_edgetpu"}  # --model -> artifact key


class Predicted(NamedTuple):
    """The stage's result fields (pipeline.predict.PredictResult, in its order)."""

    out: Path
    format: str
    written: int
    skipped: List[str]
    load_seconds: float
    seconds: float
    what: str


def predict(config, run, say, progress, fields=None, form: str = "coco results json", what: str = "detection"):
    """Detect in every input of config.data with the run's exported detector and write config.out (COCO results).
    `fields(object)`: a task built on detection adds its own to each row (pose: the keypoints), written as `form`;
    `what` names the run in messages."""
    from pipeline.rundir.run import artifact

    _check(config, what)
    key = MODELS[config.model]
    if not run.has(key):
        raise ConfigError(f"{run.dir} has no {key}; run `{artifact(key).producer}` first (a {what} run predicts with "
                          "its exported model)")
    if config.model == "edgetpu":
        run.check_compiled_is_current(key)
    # After the checks: pipeline.data imports TensorFlow, seconds a refused option need not wait for.
    from edge.answers.detect import detect_files, open_detector
    from pipeline.data import unlabeled
    from pipeline.rundir.files import write_json_atomic
    path = run.artifact(key)  # checks its sha256
    inputs = unlabeled.open_inputs(config.data)
    problems: Dict[int, str] = dict(inputs.problems)
    inputs.refuse_unless_skipping(problems, config.skip_bad)
    started = time.perf_counter()
    detector = open_detector(path, edgetpu=config.model == "edgetpu", threads=config.threads)
    loaded = time.perf_counter()
    rows: List[dict] = []
    found_in = set()
    keep = inputs.kept(problems)
    elements = inputs.encoded(keep)  # (position, encoded bytes)
    # As the device's `edge detect` runs: decoded and the objects read on the workers, invoked here one at a time.
    found = detect_files(detector, elements, 0.0, config.workers, source_of=lambda e: e[1],
                         name_of=lambda e: inputs.items[e[0]].name)
    with progress(int(keep.sum()), "detecting") as update:
        for (position, _), done, error in found:
            item = inputs.items[position]
            if error is not None:
                problems[position] = str(error)
            else:
                found_in.add(position)
                for o in done[0]:
                    b = o.box
                    rows.append({"image_id": position, "file_name": item.id, "category_id": o.id + 1, "category": o.label,
                                 "bbox": [round(float(b.xmin), 2), round(float(b.ymin), 2), round(float(b.xmax - b.xmin), 2),
                                          round(float(b.ymax - b.ymin), 2)],
                                 **(fields(o) if fields else {}), "score": round(float(o.score), 6)})
            update(1)
    inputs.refuse_unless_skipping(problems, config.skip_bad)
    if not found_in:
        raise DataError(f"every one of the {len(inputs.items)} inputs was left out (--skip-bad); nothing to write")
    seconds = time.perf_counter() - loaded
    out = Path(config.out)
    write_json_atomic(out, rows, indent=1)
    skipped = [problems[i] for i in sorted(problems)]
    return Predicted(out, form, len(found_in), skipped, loaded - started, seconds,
                     f"{path.name} ({config.model}), one image at a time, {len(rows)} objects; "
                     "images decoded by the pixel contract (edge.pixels.preprocess), as the device decodes")


def _check(config, task: str) -> None:
    if config.out_format != "json":
        raise ConfigError(f"--out {config.out}" + (f" --format {config.format}" if config.format else "")
                          + f": a {task} run writes COCO results JSON; expected a .json file (no CSV)")
    wrong = [f"--{n.replace('_', '-')}" for n in ("batch_size", "tpu", "cpu_replicas") if getattr(config, n) is not None]
    if wrong:
        raise ConfigError(f"{', '.join(wrong)} apply to a classification run's SavedModel; a {task} run predicts with "
                          "its exported TFLite model one image at a time")
