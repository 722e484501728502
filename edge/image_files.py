"""Which files are images: one list for the device (Pillow) and the host's data reader (tf.io.decode_image).

    from edge.image_files import IMAGE_SUFFIXES, is_image_file

Every suffix here decodes on both sides: Pillow on the device, `tf.io.decode_image` in training
(TF 2.21 reads WebP too), so a folder of class folders holds the same images wherever it is read.
"""
from __future__ import annotations

from pathlib import Path
from typing import Union

# Lower case, with the dot; compare against `path.suffix.lower()`. Sorted: messages list them in order.
IMAGE_SUFFIXES = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".webp")


def is_image_file(path: Union[str, Path]) -> bool:
    """True for a regular file whose suffix (any case) is one of IMAGE_SUFFIXES."""
    path = Path(path)
    return path.suffix.lower() in IMAGE_SUFFIXES and path.is_file()
