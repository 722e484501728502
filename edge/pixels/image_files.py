"""Which files are images: one list for the device (Pillow) and the host's data reader (tf.io.decode_image).

    from edge.pixels.image_files import IMAGE_SUFFIXES, images_under, is_image_file

Every suffix here decodes on both sides: Pillow on the device, `tf.io.decode_image` in training
(TF 2.21 reads WebP too), so a folder of class folders holds the same images wherever it is read.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Union

from edge.errors import InputError

# Lower case, with the dot; compare against `path.suffix.lower()`. Sorted: messages list them in order.
IMAGE_SUFFIXES = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".webp")


def is_image_file(path: Union[str, Path]) -> bool:
    """True for a regular file whose suffix (any case) is one of IMAGE_SUFFIXES."""
    path = Path(path)
    return path.suffix.lower() in IMAGE_SUFFIXES and path.is_file()


def images_under(folder: Union[str, Path], option: str = "folder") -> List[Path]:
    """Every image file under `folder`, at any depth, sorted; InputError (naming `option`) when there is none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{option} {folder} is not a directory, expected a folder of images")
    files = sorted(f for f in folder.rglob("*") if is_image_file(f))
    if not files:
        raise InputError(f"{option} {folder} holds no images, expected files ending in {', '.join(IMAGE_SUFFIXES)}")
    return files
