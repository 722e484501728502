"""Every file of a run by key: its name inside RUN and the command that writes it (the one table of them).

    artifact("model_int8").name        # "model_int8.tflite"
    artifact("model_int8").producer    # "pipeline export RUN --int8": for "run X first" messages
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional

from pipeline.rundir.manifest import MANIFEST_NAME


@dataclass(frozen=True)
class Artifact:
    name: str  # path inside RUN
    producer: str  # the command that writes it, for "run X first" messages
    schema: Optional[int] = None  # the schema_version of a JSON report the pipeline writes (its readers know it by this)


ARTIFACTS: Dict[str, Artifact] = {
    "saved_model": Artifact("saved_model", "pipeline train"),
    "keras_model": Artifact("keras_model.keras", "pipeline train"),
    "labels": Artifact("labels.txt", "pipeline train"),
    "history": Artifact("history.json", "pipeline train"),
    "heldout_detections": Artifact("heldout_detections.json", "pipeline train --task detect"),
    "heldout_poses": Artifact("heldout_poses.json", "pipeline train --task pose"),
    "model_float": Artifact("model_float.tflite", "pipeline export RUN"),
    "model_int8": Artifact("model_int8.tflite", "pipeline export RUN --int8"),
    "model_float16": Artifact("model_float16.tflite", "pipeline export RUN --float16"),
    "model_dynamic_range": Artifact("model_dynamic_range.tflite", "pipeline export RUN --dynamic-range"),
    "quantization_report": Artifact("quantization.json", "pipeline export RUN --int8", schema=1),
    "model_int8_edgetpu": Artifact("model_int8_edgetpu.tflite", "pipeline compile RUN"),
    "edgetpu_report": Artifact("edgetpu.json", "pipeline compile RUN", schema=1),
    "parity_report": Artifact("parity/report.json", "pipeline parity RUN", schema=1),
    "latency": Artifact("latency.json", "pipeline report RUN --latency FILE"),
    # Files of every run that the manifest does not record as artifacts: the manifest itself, and the page
    # every stage rewrites from it.
    "manifest": Artifact(MANIFEST_NAME, "pipeline train"),
    "report": Artifact("report.html", "pipeline report RUN"),
}
# `edgetpu_compiler --num_segments N` writes one model per segment, named by the compiler.
_SEGMENT = re.compile(r"model_int8_edgetpu_segment_(\d+)$")


def artifact(key: str) -> Artifact:
    """The table's row for `key` (segment keys included)."""
    if key in ARTIFACTS:
        return ARTIFACTS[key]
    if _SEGMENT.match(key):
        return Artifact("", ARTIFACTS["model_int8_edgetpu"].producer)
    raise KeyError(f"{key!r} is not an artifact of a run; expected one of {', '.join(ARTIFACTS)}")


def is_compiled(key: str) -> bool:
    return key == "model_int8_edgetpu" or bool(_SEGMENT.match(key))
