"""Uncompiled Keras image classifiers that take raw RGB pixels (0..255) and carry their own preprocessing.

Nothing here knows about strategies, files or data sets: `build(name, num_classes, image_size)`.
"""
from models.registry import MODEL_NAMES, build, check_options, check_weights_file, default_image_size, min_image_size, model_options

__all__ = ["MODEL_NAMES", "build", "check_options", "check_weights_file", "default_image_size", "min_image_size", "model_options"]
