"""The device side: open a quantized TFLite classifier or detector on a Coral board, a Pi or a host, and run it,
without TensorFlow.

    edge classify model_int8_edgetpu.tflite cat.png --top-k 3
    edge detect model_int8_edgetpu.tflite street.jpg --threshold 0.4

    from edge import Runner, open_detector, detect_file
    runner = Runner.open("model_int8.tflite")                 # a classifier: runner.classify(image, k=3)
    detector = open_detector("detector_int8.tflite")          # the same opening policy (edge.answers.runner)
    objects = detect_file(detector, "street.jpg")

Imports numpy, Pillow and one TFLite interpreter (for Edge TPU models tflite_runtime first, for
CPU models ai_edge_litert first; edge.model.interpreter), the interpreter only when a model is loaded. Nothing here imports the
host-side packages (pipeline/, models/). docs/architecture.md lists the modules by group.
"""
from __future__ import annotations

from edge.answers.classify import Class, classify, get_scores, input_details, input_size, set_input, top_k
from edge.answers.detect import Box, Detector, Object, detect_file, detect_pixels, open_detector
from edge.errors import EdgeError, EdgeTpuUnavailable, InputError, IntegrityError, ModelCheckError, ModelLoadError
from edge.model.interpreter import BACKEND_ORDER, backend_name, load_backend, make_interpreter, open_model
from edge.pixels.preprocess import dequantize, quantize
from edge.answers.runner import Runner

__all__ = [
    "BACKEND_ORDER", "Box", "Class", "Detector", "EdgeError", "EdgeTpuUnavailable", "InputError", "IntegrityError",
    "ModelCheckError", "ModelLoadError", "Object", "Runner", "backend_name", "classify", "dequantize", "detect_file",
    "detect_pixels", "get_scores", "input_details", "input_size", "load_backend", "make_interpreter", "open_detector",
    "open_model", "quantize", "set_input", "top_k",
]
