"""Write TFLite metadata with tflite-support's metadata API. Runs in the metadata writer's own environment.

    python tflite_support_tool.py REQUEST.json

Not imported by edgeflow: `pipeline.metadata` runs this file with the interpreter named by
EDGEFLOW_METADATA_PYTHON (Python 3.11 with tflite-support 0.4.4, built by `.ci/metadata-env`), because
tflite-support pins protobuf < 4, which TensorFlow 2.21 cannot import (README, "Model metadata").
It imports nothing of edgeflow and no TensorFlow.

REQUEST (JSON):
  {"op": "write", "model": IN, "out": OUT, "name": ..., "description": ..., "version": ..., "author": ...,
   "input": {"name", "description", "mean": [..], "std": [..]},   (RGB image input)
   "output": {"name", "description"},                               (classification scores)
   "labels": ["name", ...], "labels_file": "labels.txt",            (packed, TENSOR_AXIS_LABELS of the output)
   "files": [{"name": ..., "description": ..., "text": ...}]}       (packed, listed as the model's own files)
  {"op": "copy", "model": IN, "source": SRC, "out": OUT}            (SRC's metadata and packed files onto IN)
"""
import json
import os
import sys
import tempfile
import time
import zipfile

import flatbuffers
from tflite_support import metadata as _metadata
from tflite_support import metadata_schema_py_generated as _metadata_fb
from tflite_support.metadata_writers import metadata_info, writer_utils

# Packed files get a fixed date, as reproducible builds do (SOURCE_DATE_EPOCH): the populator's zipfile
# stamps the clock otherwise, and two exports of one run must give the same bytes.
_FIXED = time.struct_time((1980, 1, 1, 0, 0, 0, 1, 1, 0))


class _FixedClock:
    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def localtime(*_):
        return _FIXED


zipfile.time = _FixedClock()


def _write(request, model):
    folder = tempfile.mkdtemp(prefix="edgeflow-metadata-")
    general = metadata_info.GeneralMd(name=request["name"], version=request["version"],
                                      description=request["description"], author=request["author"])
    model_meta = general.create_metadata()
    packed = []
    own = []
    for f in request.get("files", []):
        path = os.path.join(folder, f["name"])
        with open(path, "w", encoding="utf-8") as out:
            out.write(f["text"])
        packed.append(path)
        own.append(metadata_info.AssociatedFileMd(path, f["description"], _metadata_fb.AssociatedFileType.DESCRIPTIONS))
    model_meta.associatedFiles = [f.create_metadata() for f in own]

    labels_path = os.path.join(folder, request["labels_file"])
    with open(labels_path, "w", encoding="utf-8") as out:
        out.write("\n".join(request["labels"]) + "\n")
    packed.append(labels_path)
    image = metadata_info.InputImageTensorMd(
        name=request["input"]["name"], description=request["input"]["description"],
        norm_mean=request["input"]["mean"], norm_std=request["input"]["std"],
        color_space_type=_metadata_fb.ColorSpaceType.RGB,
        tensor_type=writer_utils.get_input_tensor_types(model)[0])
    scores = metadata_info.ClassificationTensorMd(
        name=request["output"]["name"], description=request["output"]["description"],
        label_files=[metadata_info.LabelFileMd(labels_path)],
        tensor_type=writer_utils.get_output_tensor_types(model)[0])
    subgraph = _metadata_fb.SubGraphMetadataT()
    subgraph.inputTensorMetadata = [image.create_metadata()]
    subgraph.outputTensorMetadata = [scores.create_metadata()]
    model_meta.subgraphMetadata = [subgraph]

    builder = flatbuffers.Builder(0)
    builder.Finish(model_meta.Pack(builder), _metadata.MetadataPopulator.METADATA_FILE_IDENTIFIER)
    populator = _metadata.MetadataPopulator.with_model_buffer(model)
    populator.load_metadata_buffer(builder.Output())
    populator.load_associated_files(packed)
    populator.populate()
    return populator.get_model_buffer()


def _copy(request, model):
    with open(request["source"], "rb") as f:
        source = f.read()
    populator = _metadata.MetadataPopulator.with_model_buffer(model)
    populator.load_metadata_and_associated_files(source)
    populator.populate()
    return populator.get_model_buffer()


def main(path):
    with open(path, encoding="utf-8") as f:
        request = json.load(f)
    with open(request["model"], "rb") as f:
        model = bytearray(f.read())
    result = {"write": _write, "copy": _copy}[request["op"]](request, model)
    with open(request["out"], "wb") as f:
        f.write(result)


if __name__ == "__main__":
    main(sys.argv[1])
