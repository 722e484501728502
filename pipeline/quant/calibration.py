"""The int8 calibration images: class-balanced and seeded draws of the run's training split, or a .npy given.

Never the held-out examples (the split comes from the run's recorded identities), so calibration cannot
flatter parity; the same seed gives the same images, so two exports of one run give identical bytes.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from edge.files.bounded import open_regular
from pipeline.errors import DataError

DEFAULT_CALIBRATION_SAMPLES = 300


# --calibration-data is read on the host; a few thousand images at 512x512 stay far below this.
MAX_CALIBRATION_BYTES = 4 << 30


def read_calibration_npy(path: Path, size: int) -> np.ndarray:
    """uint8 images [N, size, size, 3] from a .npy file, its header checked before the array is read: the shape
    it declares must be that, and its bytes must be the file's (a 3 KB file declaring 715 GiB is refused)."""
    expected = f"a .npy file of uint8 images [N, {size}, {size}, 3]"
    try:
        with open_regular(path, MAX_CALIBRATION_BYTES, "--calibration-data", DataError) as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            if dtype != np.uint8 or len(shape) != 4 or tuple(shape[1:]) != (size, size, 3) or not shape[0]:
                raise DataError(f"--calibration-data {path} declares {dtype} {list(shape)}; expected {expected} with N >= 1")
            declared, actual = int(np.prod(shape)) * dtype.itemsize, os.fstat(f.fileno()).st_size - f.tell()
            if declared != actual:
                raise DataError(f"--calibration-data {path} declares {declared} bytes of images but holds {actual}; "
                                f"expected a complete {expected}")
            f.seek(0)
            return np.lib.format.read_array(f, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise DataError(f"--calibration-data {path} is not a .npy array ({err}); expected {expected}") from None


def balanced_sample(labels: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Indices of `n` examples drawn round-robin over classes, each class in a seeded random order."""
    rng = np.random.default_rng(seed)
    per_class = [rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)]
    chosen: List[int] = []
    depth = 0
    while len(chosen) < n:
        row = [int(idx[depth]) for idx in per_class if depth < len(idx)]
        if not row:
            break
        chosen += row[: n - len(chosen)]
        depth += 1
    return np.array(chosen, dtype=np.int64)


def calibration_images(run, config, image_size: int) -> Tuple[np.ndarray, np.ndarray, Dict[str, object], List[str]]:
    """(images uint8 [n,S,S,3], their labels or -1, facts for the manifest, notes) for calibration."""
    from pipeline.data import load_split

    wanted = config.calibration_samples or DEFAULT_CALIBRATION_SAMPLES
    notes: List[str] = []
    if config.calibration_data is not None:
        path = Path(config.calibration_data)
        images = read_calibration_npy(path, image_size)
        labels = np.full(len(images), -1, np.int32) if images.ndim else np.zeros(0, np.int32)
        source = {"source": str(path), "balanced": False}
    else:
        images, labels = load_split(run, "train")
        keep = np.arange(len(images))
        source = {"source": "train split of " + run.data.train_spec, "balanced": True}
        exclude = tuple(getattr(config, "calibration_exclude", ()))  # the remedy ladder's tuning split
        if exclude:
            keep = np.setdiff1d(np.arange(len(images)), np.asarray(exclude, np.int64))
            images, labels = images[keep], labels[keep]
            source["excluded"] = len(exclude)
    expected = (image_size, image_size, 3)
    if images.dtype != np.uint8 or images.ndim != 4 or tuple(images.shape[1:]) != expected:
        raise DataError(
            f"calibration images are {images.dtype} {list(images.shape)}, expected uint8 [N, {image_size}, {image_size}, 3] "
            f"(raw pixels at the run's image size {image_size})"
        )
    if len(images) == 0:
        raise DataError("calibration data holds no images; expected at least 1")
    if len(images) < wanted:
        notes.append(f"calibrating on {len(images)} images: the calibration data has fewer than the {wanted} asked for")
    n = min(wanted, len(images))
    if source["balanced"]:
        index = balanced_sample(labels, n, config.seed)
    else:
        index = np.sort(np.random.default_rng(config.seed).permutation(len(images))[:n])
    facts = {**source, "samples": int(n), "requested": int(wanted), "seed": config.seed}
    images, labels = images[index], labels[index]
    fed = tuple(getattr(config, "calibration_clients", ()))
    if fed and config.calibration_data is None:  # a .npy holds pixels, no files for a client to open
        extra = client_feeds(run, keep[index], fed, image_size)
        images, labels = np.concatenate([images, extra]), np.concatenate([labels, np.tile(labels, len(fed))])
        facts["clients"] = list(fed)
    return images, labels, facts, notes


def client_feeds(run, positions: np.ndarray, names: Tuple[str, ...], image_size: int) -> np.ndarray:
    """The pixels each named client hands a Coral-convention uint8 input (bytes as they are) for the training images at
    `positions` (of the train split), opened from their stored files as parity ships a held-out image."""
    from edge.documents.bundle import image_file
    from pipeline.data.identity import resolve_split
    from pipeline.inference.client_scores import CLIENTS
    from pipeline.quant.convention import SCALE, ZERO_POINT

    source, train = resolve_split(run, "train")
    chosen = train[np.asarray(positions, np.int64)]
    details = {"shape": np.array([1, image_size, image_size, 3]), "dtype": np.uint8, "quantization": (SCALE, ZERO_POINT["uint8"])}
    files = [image_file(i, source.examples[j].id, original)[1] for i, (j, original) in enumerate(zip(chosen, source.originals(chosen)))]
    return np.concatenate([np.concatenate([CLIENTS[name].feed(f, details, run.contract) for f in files]) for name in names])
