"""Uncompiled Keras image classifiers that take raw RGB pixels (0..255) and carry their own preprocessing.

Nothing here knows about strategies, files or data sets: `build(name, num_classes, image_size)`.
"""
from models.pretrained import IMAGENET, WeightsUnavailable
from models.registry import MODEL_NAMES, Built, build, build_recorded, check_options, check_weights_file, default_image_size, has_base, in_model_preprocessing, min_image_size, model_options

__all__ = ["IMAGENET", "MODEL_NAMES", "Built", "WeightsUnavailable", "build", "build_recorded", "check_options", "check_weights_file", "default_image_size", "has_base", "in_model_preprocessing", "min_image_size", "model_options"]
