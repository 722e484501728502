"""A COCO export of photographs with several classes, built from the photographs installed on this machine.

    .venv/bin/python bench/detect/photo_scenes.py OUT [--count 1000] [--seed 0] [--size 256x192]

No labelled photographs ship with the project or its dependencies, so the objects are cut from four real photos
(scikit-learn's china.jpg and flower.jpg, Coral's parrot.jpg in ../shared/reference, matplotlib's grace_hopper.jpg)
and pasted (a random 75-100% of the object's region, scaled to 10-55% of the image's height, flipped, re-exposed, with
noise) onto crops of the same photos' object-free parts (trees and lake, leaves, plants, the flag), beside zero to
two unlabelled pasted rectangles of background: four classes (pagoda, dahlia, parrot, face), one to five objects per
image, none more than 30% hidden by another, saved as JPEGs at camera-like qualities with OUT/annotations.json in
COCO's form (pipeline.tasks.detect.data.coco's writer). The object and background regions below were picked by eye on the photos.
"""
from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# photo -> (object class, object box, background boxes), boxes (left, top, right, bottom) in the photo's pixels.
REGIONS = {
    "china": ("pagoda", (60, 25, 370, 420), [(390, 0, 640, 427)]),
    "flower": ("dahlia", (170, 80, 450, 360), [(0, 0, 160, 427), (480, 0, 640, 300)]),
    "parrot": ("parrot", (100, 100, 460, 880), [(0, 0, 180, 300), (0, 600, 150, 929)]),
    "grace_hopper": ("face", (140, 20, 380, 320), [(0, 0, 130, 420)]),
}


def photo_paths() -> dict:
    import matplotlib
    import sklearn

    sk = Path(sklearn.__file__).parent / "datasets" / "images"
    return {"china": sk / "china.jpg", "flower": sk / "flower.jpg",
            "parrot": REPO.parent / "shared" / "reference" / "coral" / "parrot.jpg",
            "grace_hopper": Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"}


def _covered(a, b) -> float:
    """The largest share of either box that the other covers (a small box inside a big one is fully covered)."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return w * h / min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))


def background(rng, backgrounds: list, size) -> Image.Image:
    """A random crop of a random object-free photo part, mirrored half the time, with zero to two unlabelled pasted
    rectangles of background."""
    width, height = size
    bg = backgrounds[rng.integers(len(backgrounds))]
    cw = int(rng.integers(bg.width // 2, bg.width + 1))
    ch = int(rng.integers(bg.height // 2, bg.height + 1))
    cx, cy = int(rng.integers(0, bg.width - cw + 1)), int(rng.integers(0, bg.height - ch + 1))
    canvas = bg.crop((cx, cy, cx + cw, cy + ch)).resize(size, Image.BILINEAR)
    if rng.random() < 0.5:
        canvas = canvas.transpose(Image.FLIP_LEFT_RIGHT)
    for _ in range(int(rng.integers(0, 3))):
        # Unlabelled rectangles of background pasted like the objects, so a pasted edge alone is no object.
        patch = backgrounds[rng.integers(len(backgrounds))]
        pw, ph = int(rng.uniform(0.15, 0.5) * width), int(rng.uniform(0.15, 0.5) * height)
        px, py = int(rng.integers(0, patch.width - pw // 2)), int(rng.integers(0, patch.height - ph // 2))
        piece = patch.crop((px, py, px + pw // 2, py + ph // 2)).resize((pw, ph), Image.BILINEAR)
        canvas.paste(piece, (int(rng.integers(0, width - pw + 1)), int(rng.integers(0, height - ph + 1))))
    return canvas


def cut_photos():
    """The photos cut by REGIONS: the class names, the objects and the object-free backgrounds (PIL images)."""
    photos = {name: Image.open(path).convert("RGB") for name, path in photo_paths().items()}
    labels = [REGIONS[name][0] for name in REGIONS]
    objects = [photos[name].crop(REGIONS[name][1]) for name in REGIONS]
    backgrounds = [photos[name].crop(box) for name in REGIONS for box in REGIONS[name][2]]
    return labels, objects, backgrounds


def pick_object(rng, objects: list, height: int, smallest: float):
    """A random object of `objects`: its index, a random 75-100% of its region (sx, sy, sw, sh), so no two copies show
    the same picture, and the width and height it is drawn at (a `smallest`-0.55 share of the scene's `height`, its
    aspect ratio kept within 20%)."""
    c = int(rng.integers(len(objects)))
    obj = objects[c]
    sw, sh = obj.width * float(rng.uniform(0.75, 1.0)), obj.height * float(rng.uniform(0.75, 1.0))
    sx, sy = float(rng.uniform(0, obj.width - sw)), float(rng.uniform(0, obj.height - sh))
    h = float(rng.uniform(smallest, 0.55)) * height
    w = h * sw / sh * float(rng.uniform(0.8, 1.2))
    return c, (sx, sy, sw, sh), w, h


def varied(rng, piece: Image.Image) -> Image.Image:
    """`piece` mirrored half the time, re-exposed (x0.6-1.3) and with noise (a sigma of 0-8 grey levels)."""
    if rng.random() < 0.5:
        piece = piece.transpose(Image.FLIP_LEFT_RIGHT)
    pixels = np.asarray(piece, np.float32) * rng.uniform(0.6, 1.3) + rng.normal(0, rng.uniform(0, 8), (piece.height, piece.width, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def scenes(count: int, size=(256, 192), seed: int = 0):
    """DetSource of `count` composed photos (pipeline.tasks.detect.data.examples' in-memory form)."""
    from pipeline.tasks.detect.data.examples import DetSource, make_example

    rng = np.random.default_rng(seed)
    labels, objects, backgrounds = cut_photos()
    width, height = size
    examples = []
    for i in range(count):
        canvas = background(rng, backgrounds, size)
        boxes, classes = [], []
        for _ in range(int(rng.integers(1, 6))):
            for _try in range(20):
                c, (sx, sy, sw, sh), w, h = pick_object(rng, objects, height, smallest=0.1)
                obj = objects[c]
                if w > 0.9 * width:
                    continue
                x, y = float(rng.uniform(0, width - w)), float(rng.uniform(0, height - h))
                box = (x, y, x + w, y + h)
                if all(_covered(box, b) <= 0.3 for b in boxes):
                    break
            else:
                continue
            piece = obj.crop((round(sx), round(sy), round(sx + sw), round(sy + sh))).resize((max(1, round(w)), max(1, round(h))),
                                                                                         Image.BILINEAR)
            piece = varied(rng, piece)
            canvas.paste(piece, (round(x), round(y)))
            boxes.append((round(x), round(y), min(width, round(x) + piece.width), min(height, round(y) + piece.height)))
            classes.append(c)
        # A later object pasted over an earlier one hides at most 30% of it, so the earlier box stays the object's.
        buffer = io.BytesIO()
        canvas.save(buffer, "JPEG", quality=int(rng.integers(80, 96)))
        normalized = [(t / height, l / width, b / height, r / width) for l, t, r, b in boxes]
        examples.append(make_example(f"images/IMG_{i:05d}.jpg", buffer.getvalue(), normalized, classes, len(labels),
                                     f"scene {i}", [f"scene {i} object {k}" for k in range(len(boxes))]))
    return DetSource("photos", "coco", labels, examples)


def scene_arguments(description: str, count: int, size: str) -> argparse.Namespace:
    """The command line of a script that writes scenes: OUT, --count, --seed and --size WIDTHxHEIGHT (as a tuple)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=count)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", default=size, help="WIDTHxHEIGHT")
    args = parser.parse_args()
    args.size = tuple(int(v) for v in args.size.split("x"))
    return args


def main() -> None:
    from pipeline.tasks.detect.data.coco import write_coco

    args = scene_arguments(__doc__.splitlines()[0], count=1000, size="256x192")
    source = scenes(args.count, args.size, args.seed)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    write_coco(source, out / "annotations.json")
    counts = np.bincount(np.concatenate([e.classes for e in source.examples]), minlength=len(source.labels))
    print(f"wrote {out / 'annotations.json'}: {len(source.examples)} images, "
          + ", ".join(f"{n} {name}" for n, name in zip(counts, source.labels)))


if __name__ == "__main__":
    main()
