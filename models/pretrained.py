"""Where a model's starting weights came from: Keras' ImageNet files or a local file, with sha256.

`--weights imagenet` goes through Keras' own loader (the application builders call
keras.utils.get_file, cache ~/.keras/models), so a machine with internet gets what the Keras
tutorials get. Offline, Keras says only "URL fetch failure"; `keras_downloads` watches the
loader so the error can name the file to place in the cache and the address to fetch it from.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Dict, Iterator, List, Optional

IMAGENET = "imagenet"


class WeightsUnavailable(ValueError):
    """Keras could not fetch its ImageNet weights (offline, or a damaged download)."""


def sha256_file(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def keras_downloads() -> Iterator[List[Dict[str, Optional[str]]]]:
    """Record each file Keras' loader fetches or finds in its cache: {'url', 'path'}; a failed
    fetch becomes WeightsUnavailable naming the cache path and the URL."""
    from tf_keras.src.utils import data_utils  # the module the application builders call get_file through

    fetched: List[Dict[str, Optional[str]]] = []
    real_get_file = data_utils.get_file

    def get_file(fname=None, origin=None, *args, cache_subdir="datasets", cache_dir=None, **kwargs):
        name = fname or os.path.basename(origin or "")
        cache = _cache_dir(cache_dir, cache_subdir)
        try:
            path = real_get_file(fname, origin, *args, cache_subdir=cache_subdir, cache_dir=cache_dir, **kwargs)
        except Exception as err:  # Keras raises a bare Exception for a failed fetch
            raise WeightsUnavailable(
                f"cannot fetch Keras' ImageNet weights ({_reason(err, origin)}); offline, download {origin} "
                f"on a machine with internet and place it at {os.path.join(cache, name)} (Keras' cache), or give "
                f"--weights a local file"
            ) from err
        fetched.append({"url": origin, "path": str(path)})
        return path

    data_utils.get_file = get_file
    try:
        yield fetched
    finally:
        data_utils.get_file = real_get_file


def _reason(err: Exception, origin: Optional[str]) -> str:
    text = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
    return text.replace(f"URL fetch failure on {origin}: ", "")[:200]  # the URL is named once, below


def _cache_dir(cache_dir: Optional[str], cache_subdir: str) -> str:
    # Keras' own rule (data_utils.get_file): ~/.keras, or /tmp/.keras when that is not writable.
    base = os.path.expanduser(cache_dir or os.path.join("~", ".keras"))
    if not os.access(base, os.W_OK):
        base = os.path.join("/tmp", ".keras")
    return os.path.join(base, cache_subdir)


def record(weights, fetched: List[Dict[str, Optional[str]]]) -> Optional[Dict[str, Optional[str]]]:
    """What the manifest keeps of the starting weights: source, path, URL and the file's sha256."""
    if weights is None:
        return None
    if weights == IMAGENET:
        if len(fetched) != 1:
            raise AssertionError(f"expected Keras to load one ImageNet weights file, it loaded {len(fetched)}")
        return {"source": IMAGENET, "path": fetched[0]["path"], "url": fetched[0]["url"],
                "sha256": sha256_file(fetched[0]["path"])}
    return {"source": "file", "path": str(Path(weights).resolve()), "url": None, "sha256": sha256_file(weights)}
