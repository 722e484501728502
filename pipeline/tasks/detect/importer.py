"""`pipeline import --task detect`: an Ultralytics YOLO detector (v8, v9, 11, as `format=onnx` writes it) imported with
its decoding tail cut (yolo_tail.py), so the run's model ends in edgeflow's YOLO head layout (yolo_wrap.py) and export,
the pre-flight, parity and the device read it as they read a run trained with `--head yolo`.

What the file says is read: its input (1, 3, S, S), its classes (Ultralytics writes `names` into the ONNX metadata)
and, when the metadata says Ultralytics wrote it, its normalization (RGB 0..1, as Ultralytics' predictor feeds it).
What it does not say is asked for (--input-range, --labels); a contradiction is refused. The data's classes must be
the model's, in its order (a YOLO data.yaml's `names`). Parity's reference is the ONNX file itself in onnxruntime, its
own decoded output through host NMS (reference.py).
"""
from __future__ import annotations

import ast
import io
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from pipeline.errors import ConfigError, DataError
from pipeline.importing import contract as contract_mod
from pipeline.importing.task_import import TaskImport
from pipeline.tasks.detect.heads.yolo.onnx_tail import BOX_CHANNELS, REG_MAX, STRIDES

ULTRALYTICS_RANGE = (0.0, 1.0)  # what Ultralytics' predictor feeds its models: RGB pixels / 255


class DetectImport(TaskImport):
    def __init__(self, describe, examples, identity):
        # The detection task's own record helpers (pipeline/tasks/detect/task.py), so an imported run's data entry is a
        # trained run's.
        self._describe, self._examples, self._identity = describe, examples, identity

    def read(self, fmt: str, path: Path, scratch: Path, config):
        from pipeline.importing import onnx_file
        from pipeline.tasks.detect.heads.yolo import onnx_tail as yolo_tail

        if fmt != "onnx":
            raise ConfigError(f"--task detect imports an ONNX detector (Ultralytics' format=onnx: YOLOv8, v9, 11); {path} "
                              f"is a {fmt} model; expected an .onnx file")
        onnx = onnx_file._need("onnx")
        model = onnx_file._load(onnx, path)
        model_input = onnx_file._image_input(model, path)
        onnx_file._check_ops(model, path)
        found = yolo_tail.find(model, str(path))
        meta = _metadata(model)
        facts: Dict[str, object] = {"cut": found.describe(), "cut_ops": found.tail_ops,
                                    "metadata": {k: meta[k] for k in ("author", "version", "task", "imgsz") if k in meta}}
        names = _names(meta, found.num_classes, path)
        if names:
            facts["names"] = names
            facts["labels_from"] = f"the model's metadata (names, {len(names)} classes)"
        from pipeline.importing.saved_model import Loaded

        loaded = Loaded("onnx", model_input, found.num_classes, scratch / "onnx2tf", "", "nhwc", 1, facts)
        self.contract(loaded, config)  # what is missing or contradicts is refused before the conversion runs
        cut_path = scratch / "cut.onnx"
        yolo_tail.cut(model, found, cut_path)
        onnx_file._convert(cut_path, loaded.saved_model, None, _sample_pixels(config), 1)
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

    def labels(self, labels: Optional[List[str]], config, loaded) -> List[str]:
        from pipeline.tasks.detect.data.specs import open_detection
        from pipeline.tasks.classify.importer import check_labels

        if labels is not None:
            check_labels(labels, config, loaded.num_outputs, "class logits")
        names = labels or (loaded.facts or {}).get("names")
        data_names = list(open_detection(config.data).labels)
        if names is None:
            if len(data_names) != loaded.num_outputs:
                raise DataError(f"data {config.data} has {len(data_names)} classes, the model {config.model} outputs "
                                f"{loaded.num_outputs} class logits; expected one class per logit (or --labels FILE)")
            return data_names
        if names != data_names:
            raise DataError(f"data {config.data} names the classes {', '.join(data_names[:10])}; the model {config.model} "
                            f"{', '.join(names[:10])}; expected the model's classes in its order (a data.yaml's names)")
        return list(names)

    def data(self, config, labels: List[str], image_size: int) -> dict:
        from pipeline.data import Split
        from pipeline.data.examples import val_indices
        from pipeline.tasks.detect.data.specs import open_detection
        from pipeline.importing.tuning_share import check_apart, empty_heldout, tuning_fraction, tuning_record
        from pipeline.tasks import Plan

        _describe, _examples, _identity = self._describe, self._examples, self._identity

        source = open_detection(config.data)
        val = open_detection(config.val_data, source.labels) if config.val_data else None
        split = Split(config.heldout_fraction, config.seed, tuning_fraction(config))
        train = _examples(source, "all" if val else "train", split)
        heldout = val.examples if val else _examples(source, "heldout", split)
        tuning = []
        if val and split.tuning_fraction > 0:  # the tuning split is a share of --val-data, the rest held out
            tuning, heldout = ([val.examples[i] for i in val_indices(val.examples, part, split)] for part in ("tuning", "heldout"))
            check_apart(tuning, heldout, config)
        if not heldout:
            raise DataError(empty_heldout(config, len(tuning)))
        plan = Plan(source, val._replace(examples=heldout) if val else None, split, None, len(train), None, len(heldout), {}, 0)
        return {  # the specs as later stages, from any folder, open them again
            "train": _describe(_absolute(config.data), source),
            "val": _describe(_absolute(config.val_data), val) if val else None,
            "images": [],
            "split": {"heldout_fraction": split.heldout_fraction, "seed": split.seed, "train_examples": len(train),
                      "heldout_examples": len(heldout),
                      "method": "seeded hash of each example's identity" if not val else "separate --val-data",
                      **({"tuning_fraction": split.tuning_fraction} if split.tuning_fraction > 0 else {}),
                      **tuning_record(split, len(tuning))},
            "identity": _identity(plan, tuning),
            "heldout_count": len(heldout),
        }

    def wrap(self, loaded, contract, folder: Path) -> None:
        from pipeline.tasks.detect.heads.yolo import import_wrap as yolo_wrap

        yolo_wrap.write(loaded.saved_model, contract, folder, loaded.num_outputs)

    def check(self, folder: Path, contract, loaded) -> None:
        import tensorflow as tf

        from pipeline.tasks.detect.heads.yolo import import_wrap as yolo_wrap

        size, n = contract.image_size, _anchor_count(contract.image_size)
        out = yolo_wrap.load(folder)(tf.constant(np.full((1, size, size, 3), 128.0, np.float32)))
        shapes = {k: list(v.shape) for k, v in out.items()}
        expected = {"box_dist": [1, n, BOX_CHANNELS], "class_logits": [1, n, loaded.num_outputs]}
        if shapes != expected:
            raise ConfigError(f"the imported detector answers a {size}x{size} image with {shapes}; expected {expected}")

    def record(self, config, fmt: str, loaded, contract, labels: List[str], data: dict) -> dict:
        from pipeline.data import TRAINING_CONTRACT
        from pipeline.tasks.classify.importer import model_record
        from pipeline.tasks.detect.heads.yolo.import_wrap import LOGIT_LIMIT

        size = contract.image_size
        return {
            "task": "detect",
            "model": {**model_record(config, fmt, contract, len(labels)), "architecture": "yolo",
                      "outputs": {"box_dist": f"[B, N, {BOX_CHANNELS}] logits of {REG_MAX}-bin distributions of the "
                                              "distances left, top, right, bottom from each anchor point, in strides",
                                  "class_logits": f"[B, N, C] class logits, clamped to [-{LOGIT_LIMIT:g}, {LOGIT_LIMIT:g}] "
                                                  "in the graph"}},
            "detection": {"head": "yolo", "strides": list(STRIDES), "reg_max": REG_MAX, "anchor_count": _anchor_count(size),
                          "logit_limit": LOGIT_LIMIT, "resize": "stretch", "imported_tail": loaded.facts.get("cut")},
            "preprocessing": TRAINING_CONTRACT.as_record(),
            "labels": labels,
            "data": data,
        }


def _absolute(spec: str) -> str:
    """A data spec that names a file or folder, made absolute; a built-in one (shapes?...) as given."""
    return str(Path(spec).resolve()) if Path(spec).exists() else spec


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


def _sample_pixels(config) -> np.ndarray:
    """A few of the user's training images at onnx2tf's sample size, uint8 [N, 128, 128, 3]."""
    from PIL import Image

    from pipeline.data import Split
    from pipeline.tasks.detect.data.specs import open_detection
    from pipeline.importing.onnx_file import SAMPLE_COUNT, SAMPLE_SIZE

    source = open_detection(config.data)
    picked = source.indices("train", Split(config.heldout_fraction, config.seed))[:SAMPLE_COUNT]
    images = []
    for i in picked:
        with Image.open(io.BytesIO(source.examples[i].image)) as im:
            images.append(np.asarray(im.convert("RGB").resize((SAMPLE_SIZE, SAMPLE_SIZE), Image.BILINEAR)))
    return np.stack(images)

