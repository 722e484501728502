"""The count task's export: full-integer int8 (uint8 in, calibrated on the training pictures), written with its
sidecar and manifest entry in one transaction."""
from __future__ import annotations

import numpy as np

from edge.model.sidecar import sidecar_path, sidecar_record
from pipeline.errors import ConfigError
from pipeline.quant.convert import Mode
from pipeline.rundir.files import json_bytes
from pipeline.tasks import Exported
from tests.pipeline.tasks.count import data


def export(config, run) -> Exported:
    import tensorflow as tf

    if config.mode is not Mode.INT8:
        raise ConfigError(f"the count task exports --int8 only; got {config.mode.value}")
    split = run.data.split
    train, _ = data.split(run.data.train["examples"], split["heldout_fraction"], split["seed"])
    images = [data.pixels(e.png)[None].astype(np.float32) for e in train]
    converter = tf.lite.TFLiteConverter.from_saved_model(str(run.artifact("saved_model")))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([image] for image in images)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.uint8
    converter.inference_output_type = tf.int8
    model = converter.convert()
    with run.transaction() as t:
        path = t.write("model_int8", model, size_bytes=len(model))
        side = t.write_file(sidecar_path(path), json_bytes(sidecar_record(path.name, model, run.labels, image_size=data.SIZE)))
    return Exported(path, side, f"int8 {len(model) / 1024:.1f} KiB")
