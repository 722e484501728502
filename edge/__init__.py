"""The device side: run a quantized TFLite classifier on a Coral board, a Pi or a host, without TensorFlow.

    edge classify model_int8_edgetpu.tflite cat.png --top-k 3

Imports numpy, Pillow and one TFLite interpreter (for Edge TPU models tflite_runtime first, for
CPU models ai_edge_litert first; edge.interpreter), the interpreter only when a model is loaded. Nothing here imports the
host-side packages (pipeline/, models/).
"""
from __future__ import annotations

from edge.classify import Class, classify, get_scores, input_details, input_size, set_input, top_k
from edge.errors import EdgeError, EdgeTpuUnavailable, InputError, IntegrityError, ModelCheckError, ModelLoadError
from edge.interpreter import BACKEND_ORDER, backend_name, load_backend, make_interpreter, open_model
from edge.preprocess import dequantize, quantize

__all__ = [
    "BACKEND_ORDER", "Class", "EdgeError", "EdgeTpuUnavailable", "InputError", "IntegrityError", "ModelCheckError",
    "ModelLoadError", "backend_name", "classify", "dequantize", "get_scores", "input_details", "input_size",
    "load_backend", "make_interpreter", "open_model", "quantize", "set_input", "top_k",
]
