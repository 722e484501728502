"""Decode the next images while the interpreter runs: one worker thread, a few images ahead, input order.

    from edge.prefetch import prefetch
    for item, pixels, error in prefetch(paths, lambda p: load_pixels(p, (224, 224), name=str(p))):
        ...   # pixels is None and error the InputError naming the file when that one could not be read

Pillow releases the GIL while it decodes and resizes, so a worker thread overlaps that work with
the interpreter's invoke (which releases it too). At most `ahead` images wait decoded: memory
stays bounded on a board however many files there are.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Deque, Iterable, Iterator, Optional, Tuple, TypeVar

from edge.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

AHEAD = 4  # decoded images waiting at most: enough to cover a slow file, small enough for a board


def prefetch(items: Iterable[T], load: Callable[[T], R], ahead: int = AHEAD) -> Iterator[Tuple[T, Optional[R], Optional[InputError]]]:
    """(item, load(item), None) or (item, None, the InputError it raised), in the order of `items`.

    Only InputError (a file the pixel contract cannot take) is handed back per item; anything else
    is a bug or a machine fault and propagates. Stopping the iteration early waits for the images
    already under way and decodes no more.
    """
    if ahead < 1:
        raise ValueError(f"ahead {ahead}, expected 1 or more")
    source = iter(items)
    pending: Deque[Tuple[T, "object"]] = deque()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="edge-decode") as pool:
        try:
            for item in source:
                pending.append((item, pool.submit(load, item)))
                if len(pending) >= ahead:
                    yield _result(*pending.popleft())
            while pending:
                yield _result(*pending.popleft())
        finally:
            for _, future in pending:
                future.cancel()


def _result(item, future) -> tuple:
    try:
        return item, future.result(), None
    except InputError as err:
        return item, None, err
