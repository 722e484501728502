"""How often the held-out images go past the int8 range of MobileNetV2's global pool output, per calibration set.

    .venv/bin/python bench/remedy/pool_range.py RUNS/photos/mobilenet_v2_a0.35-96-s1234 [EXPORT_SUFFIX ...]

RUNS is bench/remedy/registry_models.py's folder. The trained run's Keras model gives the float pool output (the `pool`
layer) on the 160 held-out photos (resized to the model's input with Pillow's bilinear filter); each export's
quantization.json gives the top of the int8 range of the MEAN op. Prints, per export, that top, the share of pool
values above it and the held-out images that have one.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
DEFAULT_EXPORTS = ("-per-tensor-default", "-per-tensor-calibration-samples8-default")


def main() -> None:
    import tf_keras as keras
    from PIL import Image

    stem = Path(sys.argv[1])
    exports = sys.argv[2:] or DEFAULT_EXPORTS
    trained = stem.with_name(stem.name + ".trained")
    model = keras.models.load_model(trained / "keras_model.keras", compile=False)
    pool = keras.Model(model.input, model.get_layer("pool").output)
    size = model.input.shape[1]
    files = sorted((stem.parent / "val").rglob("*.jpg"))
    pixels = np.stack([np.asarray(Image.open(f).convert("RGB").resize((size, size), Image.BILINEAR), np.float32)
                       for f in files])
    out = pool.predict(pixels, verbose=0)
    print(f"float pool output on {len(files)} held-out images: max {out.max():.2f}")
    for suffix in exports:
        layers = json.loads((stem.with_name(stem.name + suffix) / "quantization.json").read_text())["layers"]
        mean = next(layer for layer in layers if layer["op"] == "MEAN")
        top = mean["scale"] * (127 - mean["zero_point"])
        over = out > top
        names = [f"{f.parent.name}/{f.name}" for f, row in zip(files, over) if row.any()]
        print(f"{suffix}: int8 top {top:.2f}, values above {over.mean():.4%}, images {len(names)}: {', '.join(names)}")


if __name__ == "__main__":
    main()
