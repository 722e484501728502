"""`pipeline import --task detect` in the anchor-free head's layout: an Ultralytics YOLO detector (v8, v9, 11, as
`format=onnx` writes it) with its decoding tail cut (onnx_tail.py), so the run's model ends in this head's outputs
(import_wrap.py) and export, the pre-flight, parity and the device read it as they read a run trained with this head.

What the file says is read: its input (1, 3, S, S), its classes (Ultralytics writes `names` into the ONNX metadata)
and, when the metadata says Ultralytics wrote it, its normalization (RGB 0..1, as Ultralytics' predictor feeds it).
What it does not say is asked for (--input-range, --labels); a contradiction is refused. Parity's reference is the
ONNX file itself in onnxruntime, its own decoded output through host NMS (reference.py).
"""
from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from pipeline.errors import ConfigError
from pipeline.importing import contract as contract_mod
from pipeline.tasks.detect.heads.head import ImportSteps
from pipeline.tasks.detect.heads.yolo import import_wrap, onnx_tail
from pipeline.tasks.detect.heads.yolo.import_wrap import LOGIT_LIMIT
from pipeline.tasks.detect.heads.yolo.onnx_tail import BOX_CHANNELS, REG_MAX, STRIDES

ULTRALYTICS_RANGE = (0.0, 1.0)  # what Ultralytics' predictor feeds its models: RGB pixels / 255


class YoloImport(ImportSteps):
    """The import steps of a YOLO detector; a task built on detection subclasses them (pose's keypoints:
    pipeline/tasks/pose/heads/yolo/importer.py), with `what` its model's name in the refusals, and `_load` and
    `_expected` its wrapped model's outputs."""

    what = "detector"

    def __init__(self, head: str):
        self.name = head  # the head's name, which an imported run records as its trained runs do

    def read(self, fmt: str, path: Path, scratch: Path, config, sample_pixels: Callable[[], np.ndarray]):
        model, model_input, meta = open_onnx(fmt, path, "--task detect imports an ONNX detector (Ultralytics' "
                                                        "format=onnx: YOLOv8, v9, 11)")
        found = onnx_tail.find(model, str(path))
        facts: Dict[str, object] = {"cut": found.describe(), "cut_ops": found.tail_ops,
                                    "metadata": {k: meta[k] for k in ("author", "version", "task", "imgsz") if k in meta}}
        add_names(facts, meta, found.num_classes, path)
        return self.converted(model, model_input, found, facts, config, scratch, sample_pixels)

    def converted(self, model, model_input, found, facts: dict, config, scratch: Path,
                  sample_pixels: Callable[[], np.ndarray], extra_name: str = "extra"):
        """The Loaded model: the input contract resolved from `facts` and `config`, then the ONNX `model` cut at
        `found` (a third branch's outputs named `extra_name`_s8...) and converted by onnx2tf in `scratch`."""
        from pipeline.importing import onnx_file
        from pipeline.importing.saved_model import Loaded

        loaded = Loaded("onnx", model_input, found.num_classes, scratch / "onnx2tf", "", "nhwc", 1, facts)
        self.contract(loaded, config)  # what is missing or contradicts is refused before the conversion runs
        cut_path = scratch / "cut.onnx"
        onnx_tail.cut(model, found, cut_path, extra_name=extra_name)
        onnx_file._convert(cut_path, loaded.saved_model, None, sample_pixels(), 1)
        return loaded._replace(reader=onnx_file._reader())

    def contract(self, loaded, config):
        from edge.pixels.preprocess import normalization

        given = config.given
        if given.fit != "stretch":
            raise ConfigError(f"--fit {given.fit}: edgeflow's detection stages stretch the picture to the square input and "
                              "Frigate fits a square region of the frame its own way, which no option sets; expected --fit "
                              "stretch for --task detect (square pictures: both fits are the same)")
        ultralytics = "ultralytics" in str((loaded.facts or {}).get("metadata", {}).get("author", "")).lower()
        if not ultralytics or given.normalization() is not None:
            resolved = contract_mod.resolve(loaded.input, given, str(config.model))
            if ultralytics and not _is_unit_range(resolved.norm):
                raise ConfigError(f"{resolved.norm.source} contradicts {config.model}, an Ultralytics export that takes RGB "
                                  "0..1 (its predictor divides the pixels by 255); expected --input-range 0,1 or none")
            return resolved
        resolved = contract_mod.resolve(loaded.input, replace(given, value_range=ULTRALYTICS_RANGE), str(config.model))
        norm = normalization(list(resolved.norm.mean), list(resolved.norm.std),
                             "RGB 0..1: Ultralytics' export (its metadata names Ultralytics)")
        return replace(resolved, norm=norm, said={**resolved.said, "normalization": "the model (Ultralytics' metadata)"})

    def wrap(self, loaded, contract, folder: Path) -> None:
        import_wrap.write(loaded.saved_model, contract, folder, loaded.num_outputs)

    def check(self, folder: Path, contract, loaded) -> None:
        import tensorflow as tf

        size, n = contract.image_size, _anchor_count(contract.image_size)
        out = self._load(folder)(tf.constant(np.full((1, size, size, 3), 128.0, np.float32)))
        shapes = {k: list(v.shape) for k, v in out.items()}
        expected = self._expected(n, loaded)
        if shapes != expected:
            raise ConfigError(f"the imported {self.what} answers a {size}x{size} image with {shapes}; expected {expected}")

    def _load(self, folder: Path):
        return import_wrap.load(folder)

    def _expected(self, n: int, loaded) -> Dict[str, List[int]]:
        """The wrapped model's output shapes for `n` anchor points."""
        return {"box_dist": [1, n, BOX_CHANNELS], "class_logits": [1, n, loaded.num_outputs]}

    def record(self, model_entry: dict, loaded, contract) -> Tuple[dict, dict]:
        size = contract.image_size
        model = {**model_entry, "architecture": self.name,
                 "outputs": {"box_dist": f"[B, N, {BOX_CHANNELS}] logits of {REG_MAX}-bin distributions of the "
                                         "distances left, top, right, bottom from each anchor point, in strides",
                             "class_logits": f"[B, N, C] class logits, clamped to [-{LOGIT_LIMIT:g}, {LOGIT_LIMIT:g}] "
                                             "in the graph"}}
        detection = {"head": self.name, "strides": list(STRIDES), "reg_max": REG_MAX, "anchor_count": _anchor_count(size),
                     "logit_limit": LOGIT_LIMIT, "resize": "stretch", "imported_tail": loaded.facts.get("cut")}
        return model, detection


def open_onnx(fmt: str, path: Path, imports: str):
    """(the ONNX model, its image input, its metadata) of `path`; ConfigError unless it is ONNX (`imports`: what the
    task imports, for the refusal) with ops the converter reads."""
    from pipeline.importing import onnx_file

    if fmt != "onnx":
        raise ConfigError(f"{imports}; {path} is a {fmt} model; expected an .onnx file")
    onnx = onnx_file._need("onnx")
    model = onnx_file._load(onnx, path)
    model_input = onnx_file._image_input(model, path)
    onnx_file._check_ops(model, path)
    return model, model_input, _metadata(model)


def add_names(facts: dict, meta: Dict[str, str], num_classes: int, path: Path) -> None:
    """The class names the metadata gives, into `facts` with where they came from (nothing when it gives none)."""
    names = _names(meta, num_classes, path)
    if names:
        facts["names"] = names
        facts["labels_from"] = f"the model's metadata (names, {len(names)} classes)"


def _anchor_count(size: int) -> int:
    return sum((size // s) ** 2 for s in STRIDES)


def _is_unit_range(norm) -> bool:
    return np.allclose(norm.mean, 0.0) and np.allclose(norm.std, 255.0)


def _metadata(model) -> Dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def _names(meta: Dict[str, str], num_classes: int, path: Path) -> Optional[List[str]]:
    """The class names Ultralytics writes into the metadata ("{0: 'a', 1: 'b'}"), in class order; None when absent."""
    text = meta.get("names")
    if text is None:
        return None
    try:
        names = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ConfigError(f"{path}: its metadata's names {text[:80]!r} is not a mapping of class numbers to names; "
                          "expected what Ultralytics writes, or --labels FILE") from None
    if isinstance(names, dict):
        names = [names[k] for k in sorted(names)] if sorted(names) == list(range(len(names))) else None
    if not isinstance(names, list) or len(names) != num_classes:
        raise ConfigError(f"{path}: its metadata names {text[:80]!r}, the model outputs {num_classes} class scores; "
                          "expected one name per class (or --labels FILE)")
    return [str(n) for n in names]
