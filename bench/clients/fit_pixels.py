"""Training's client fits against the clients' own input tensors, pixel for pixel, on the photo crops.

    .venv/bin/python bench/clients/fit_pixels.py --size 32 --size 96 [--per-class 10]

For each JPEG of bench.clients.classify.write_photo_crops (160-420 px) and each input size, the pixels training's input
pipeline makes for an example given each client's fit (pipeline/data/decode.py, TensorFlow) against the tensor
that client sets (edge.clients.feeds: MediaPipe's resize and value mapping exact from its decoded pixels, pycoral's
exact on the same Pillow; tests/clients/test_reproductions.py checks both against the real clients). Prints, per
fit, the largest and the mean absolute difference in grey levels and the share of bytes that differ.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, action="append", help="input size (repeat); default 32 and 96")
    parser.add_argument("--per-class", type=int, default=10, help="crops per class (4 classes; default 10)")
    args = parser.parse_args()

    import tensorflow as tf

    from bench.clients.classify import write_photo_crops
    from edge.clients import feeds as clients
    from edge.pixels.contract import PixelContract
    from pipeline.data.client_fits import FITS
    from pipeline.data.decode import DECODERS

    decode = DECODERS["folder"]
    names = list(FITS)
    with tempfile.TemporaryDirectory() as tmp:
        files = sorted(write_photo_crops(Path(tmp), per_class=args.per_class).rglob("*.jpg"))
        data = [f.read_bytes() for f in files]
        print(f"{len(files)} photo crops (JPEG, 160-420 px a side)\n")
        print("| input | fit | its client's tensor (edge.clients.feeds) | max abs | mean abs | bytes differing |")
        print("|---|---|---|---|---|---|")
        for size in args.size or [32, 96]:
            details = {"shape": [1, size, size, 3], "dtype": np.uint8, "quantization": (1 / 128, 128)}
            contract = PixelContract()  # raw pixels: the input's real value is the pixel (scale 1, zero point 0)
            raw = dict(details, quantization=(1.0, 0))
            references = {
                "contract": ("edgeflow (the contract: JPEG at 1/k, antialiased bilinear)",
                             lambda d: clients.edgeflow(d, raw, contract)),
                "corner_bilinear": ("MediaPipe ImageClassifier", lambda d: clients.mediapipe_classify(d, details)),
                "lanczos": ("pycoral classify_image.py", lambda d: clients.pycoral_classify(d, details)),
                "bilinear": ("OpenCV INTER_LINEAR of the full decode (edge.clients.feeds._resize_linear)",
                             lambda d: clients._resize_linear(clients.mediapipe_pixels(d), (size, size))[np.newaxis]),
            }
            for fit, (who, reference) in references.items():
                index = tf.constant(names.index(fit))
                gaps = np.stack([np.abs(decode(tf.constant(d), size, fit=index).numpy().astype(int)
                                        - reference(d)[0].astype(int)) for d in data])
                print(f"| {size}x{size} | {fit} | {who} | {gaps.max()} | {gaps.mean():.3f} | {np.mean(gaps > 0):.1%} |")


if __name__ == "__main__":
    main()
