"""`pipeline export` of a detection run trained with the anchor-free head: its Keras model converted by yolo_export.py
(float twin or int8 in Frigate's yolo-generic layout), with the facts, metadata record and calibration the SSD
export (pipeline/tasks/detect_export.py, which hands a YOLO run's conversion here) gives its models, so the stage
writes and the remedy ladder scores it alike."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Dict


def convert(config, run, int8: bool, calibrate, converted):
    """The run's anchor-free detector (with the ladder's float edits, if any) as `converted` (detect_export.Converted),
    calibrated by `calibrate` (detect_export's: the same images and facts as the SSD head's)."""
    import tf_keras as keras

    from edge.yolo_decode import Settings
    from pipeline import metadata
    from pipeline.detection import yolo_export
    from pipeline.quant import convention, verify
    from pipeline.rundir.run import artifact
    size, labels = run.image_size, run.labels
    detector = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
    calibration, calib_facts, notes = calibrate(config, run, size) if int8 else (None, {}, [])
    key = "model_int8" if int8 else "model_float"
    contract = convention.contract(run.contract, int8=int8)
    expected = ({"dtype": "uint8", "scale": convention.SCALE, "zero_point": convention.ZERO_POINT["uint8"]} if int8
                else {"dtype": "float32", "scale": None, "zero_point": None})
    facts: Dict[str, object] = {"head": "yolo", "layout": "Frigate yolo-generic: box distributions (1, N, 64), class logits (1, N, C)",
                                "host_decode": Settings()._asdict(), "input": expected, "preprocessing": contract.as_record()}
    if int8:
        facts["calibration"] = calib_facts
    if config.float_edits:
        from pipeline.quant import float_edits

        detector = float_edits.apply(detector, config.float_edits, calibration, per_tensor=False)
        facts["float_edits"] = list(config.float_edits)
    if config.remedy:
        facts["remedy"] = config.remedy
    data = yolo_export.convert(detector, size, labels, int8=int8, calibration=calibration,
                               name=f"{run.model.name} yolo detector {'int8' if int8 else 'float32'} ({run.dir.name})",
                               record=metadata.record(run, artifact(key).name, contract, facts))
    info = verify.verify_static(data)
    facts["input"] = verify.quantization_of(info, info.inputs[0]) if int8 else expected
    return converted(data, facts, facts["input"], contract, notes)
