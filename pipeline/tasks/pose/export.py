"""`pipeline export` of a pose run: the trained model converted by its head's export (pipeline/tasks/pose/heads/: the
conversion, the outputs and their checks, the metadata), float32 or full-integer int8, written into the run with its
sidecar, as detection's export does (pipeline/tasks/detect/export.py). int8 calibrates on training-split images (or
--calibration-data), stretched to the input as training fed them. The remedy ladder has no pose scoring yet: --remedy
is refused.

`--int8 --layout ultralytics` writes a second file beside model_int8.tflite: model_int8_ultralytics.tflite, the same
trained model in the layout Ultralytics' own `YOLO(file, task="pose")` reads (the head's ultralytics.py: one output
[1, 4 + C + 3K, N] decoded in the graph, an int8 input, Ultralytics' metadata), calibrated on the same images and
recorded under model_int8's manifest entry ("ultralytics": file, sha256, size). model_int8.tflite is written as always:
parity, the bundle and `edge` read it. Ultralytics reads keypoints from the channel after the first class score, so
the layout is refused for a run of more than one class, as it is for a head that has no such layout; an int8 export
without it removes an Ultralytics file an earlier one wrote (it would no longer be the same model).
"""
from __future__ import annotations

import importlib
import importlib.util
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from edge.model.integrity import sha256_bytes
from pipeline.errors import ConfigError
from pipeline.tasks import Exported
from pipeline.tasks.detect.export import calibration_images
from pipeline.tasks.pose import heads
from pipeline.tasks.pose.data.heldout import training_examples

ULTRALYTICS = "ultralytics"  # --layout's value for the second file
ULTRALYTICS_FILE = "model_int8_ultralytics.tflite"


def export(config, run) -> Exported:
    from edge.model.integrity import sidecar_path, sidecar_record
    from pipeline import metadata
    from pipeline.quant import convention, verify
    from pipeline.rundir.files import json_bytes
    from pipeline.rundir.run import artifact

    int8 = _mode(config)
    head = heads.of_run(run)
    layout = _ultralytics_layout(config, run, head, int8)
    conversion = head.conversion(run)
    key = "model_int8" if int8 else "model_float"
    contract = convention.contract(run.contract, int8=int8)  # what this model takes: Coral's grid for int8
    expected = ({"dtype": "uint8", "scale": convention.SCALE, "zero_point": convention.ZERO_POINT["uint8"]} if int8
                else {"dtype": "float32", "scale": None, "zero_point": None})
    facts = {**conversion.facts, "input": expected, "preprocessing": contract.as_record()}
    calibration, notes = None, []
    if int8:
        calibration, facts["calibration"], notes = calibration_images(config, run, run.image_size, training_examples)
    data = conversion.convert(head.float_model(run), run.image_size, run.labels, int8=int8, calibration=calibration,
                              name=f"{run.model.name} {conversion.what} {'int8' if int8 else 'float32'} ({run.dir.name})",
                              record=metadata.record(run, artifact(key).name, contract, facts))
    info = verify.verify_static(data)
    facts["input"] = verify.quantization_of(info, info.inputs[0]) if int8 else expected
    second = None
    if layout is not None:
        second = layout.convert(head.float_model(run), run.image_size, run.labels, calibration=calibration,
                                name=f"{run.model.name} pose int8, Ultralytics' layout ({run.dir.name})")
        facts[ULTRALYTICS] = {"file": ULTRALYTICS_FILE, "sha256": sha256_bytes(second), "size_bytes": len(second),
                              "reader": "Ultralytics YOLO(file, task=\"pose\")",
                              "output": f"[1, 4 + {len(run.labels)} + 3K, N] decoded in the graph, 0..1; int8 input 0..1"}
        notes.append(f"also wrote {ULTRALYTICS_FILE} ({len(second):,} bytes) for Ultralytics' YOLO(file, task=\"pose\"): "
                     "its decoding's last ops (the box bins' softmax on) run on the CPU after the Edge TPU segment")
    with run.transaction() as t:
        path = t.write(key, data, size_bytes=len(data), **facts)
        side = t.write_file(sidecar_path(path), json_bytes(sidecar_record(path.name, data, run.labels, image_size=run.image_size,
                                                                          input=facts["input"], preprocessing=contract.as_record())))
        if second is not None:
            t.write_file(run.dir / ULTRALYTICS_FILE, second)
        elif int8 and (run.dir / ULTRALYTICS_FILE).exists():
            t.remove(run.dir / ULTRALYTICS_FILE)  # an earlier int8 model's: no longer this one
    return Exported(path, side, f"{path.name}: {len(data):,} bytes ({conversion.describes(int8)})", tuple(notes))


def _ultralytics_layout(config, run, head, int8: bool):
    """The head's module converting to Ultralytics' layout when --layout ultralytics is asked for, else None; what
    cannot have it refused by name before any work."""
    wanted = dict(getattr(config, "task_options", None) or {}).get("layout")
    if wanted in (None, "edgeflow"):
        return None
    if not int8:
        raise ConfigError(f"--layout {wanted} writes an int8 file; add --int8 (the float export has one layout)")
    if len(run.labels) != 1:
        raise ConfigError(f"--layout {wanted}: this run has {len(run.labels)} classes ({', '.join(run.labels[:4])}"
                          f"{', ...' if len(run.labels) > 4 else ''}); Ultralytics' pose reader takes keypoints from the "
                          "channel after the first class score, so its layout holds one class; export without --layout")
    name = f"{heads.__name__}.{head.name}.{ULTRALYTICS}"
    if importlib.util.find_spec(name) is None:
        raise ConfigError(f"--layout {wanted}: the {head.name} head has no Ultralytics layout; export without --layout")
    return importlib.import_module(name)


def _mode(config) -> bool:
    """True for int8, False for float32; what a pose run cannot take is refused by name."""
    from pipeline.tasks.detect.export import int8_mode, refuse_classify_options

    int8 = int8_mode(config, "pose")
    if config.repair:
        raise ConfigError("--remedy is not built for --task pose yet: the remedy ladder has no pose scoring; export "
                          "without --remedy and judge int8 with `pipeline parity`")
    refuse_classify_options(config, "pose", "--calibration-samples and --calibration-data")
    return int8
