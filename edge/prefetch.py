"""Decode the next images on worker threads while the interpreter runs, and post-process beside it: input order kept.

    from edge.prefetch import pipelined, prefetch
    for item, pixels, error in prefetch(paths, lambda p: load_pixels(p, (224, 224), name=str(p)), workers=2):
        ...   # pixels is None and error the InputError naming the file when that one could not be read
    for item, found, error in pipelined(paths, load, run=invoke_one, post=read_objects, post_on_workers=True):
        ...   # load on the workers, run here (one interpreter, one image at a time), post on the workers

Three stages per item: `load` (decode and resize) on the workers, `run` (set the input, invoke, copy the
outputs) on the calling thread, the one that owns the interpreter, and `post` (reading the outputs: scores,
boxes, a decode + NMS) either on the calling thread right after `run` or on the workers (`post_on_workers`),
whichever keeps the invoke busier: a cheap post costs less inline than a hand-over to a thread.

Pillow releases the GIL while it decodes and resizes, and the interpreter's invoke releases it too, so
threads run truly in parallel here (bench/results/edge_throughput.md). At most `ahead` images wait decoded
and at most `workers` post-processings wait to be handed back: memory stays bounded however many files
there are. Stopping the iteration early (a break, Ctrl-C, SIGTERM) cancels what has not started and waits
only for what is running (an image or so per worker): no worker outlives the command.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Deque, Iterable, Iterator, Optional, Tuple, TypeVar

from edge.errors import InputError
from edge.workers import checked_workers

T = TypeVar("T")
R = TypeVar("R")

AHEAD = 4  # decoded images waiting at most with 1 or 2 workers: enough to cover a slow file, small for a board
_END = object()


def look_ahead(workers: int) -> int:
    """Decoded images allowed to wait: AHEAD, or two per worker when there are more workers, so each stays busy."""
    return max(AHEAD, 2 * workers)


def prefetch(items: Iterable[T], load: Callable[[T], R], ahead: Optional[int] = None,
             workers: Optional[int] = None) -> Iterator[Tuple[T, Optional[R], Optional[InputError]]]:
    """(item, load(item), None) or (item, None, the InputError it raised), in the order of `items`, loaded on
    `workers` threads (None: one per available core, edge.workers) at most `ahead` items ahead.

    Only InputError (a file the pixel contract cannot take) is handed back per item; anything else
    is a bug or a machine fault and propagates.
    """
    return pipelined(items, load, ahead=ahead, workers=workers)


def pipelined(items: Iterable[T], load: Callable[[T], Any], run: Optional[Callable[[T, Any], Any]] = None,
              post: Optional[Callable[[T, Any], Any]] = None, *, workers: Optional[int] = None, ahead: Optional[int] = None,
              post_on_workers: bool = False) -> Iterator[Tuple[T, Any, Optional[InputError]]]:
    """(item, post(item, run(item, load(item))), None) per item in the order of `items` (a missing `run` or `post`
    passes its input on), or (item, None, the InputError `load` raised). `load` runs on `workers` threads (None:
    one per available core), `run` on the calling thread one item at a time, `post` on the workers when
    `post_on_workers`, else on the calling thread right after `run`. Errors other than load's InputError propagate."""
    workers = checked_workers(workers)
    ahead = look_ahead(workers) if ahead is None else ahead
    if ahead < 1:
        raise ValueError(f"ahead {ahead}, expected 1 or more")
    source = iter(items)
    loads: Deque[Tuple[T, Future]] = deque()
    # Finished items in order: (item, value or a post-processing future, error).
    done: Deque[Tuple[T, Any, Optional[InputError]]] = deque()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="edge-decode")
    try:
        while True:
            while len(loads) < ahead:
                item = next(source, _END)
                if item is _END:
                    break
                loads.append((item, pool.submit(load, item)))
            if not loads:
                break
            item, future = loads.popleft()
            try:
                value = future.result()
            except InputError as err:
                done.append((item, None, err))
            else:
                if run is not None:
                    value = run(item, value)
                if post is not None:
                    value = pool.submit(post, item, value) if post_on_workers else post(item, value)
                done.append((item, value, None))
            # Hand back every finished item at the front; wait for the oldest once `workers` are waiting.
            while done and (len(done) > workers or _ready(done[0][1])):
                yield _settled(*done.popleft())
        while done:
            yield _settled(*done.popleft())
    finally:
        # A stop (break, Ctrl-C, SIGTERM) lands here: nothing new starts, what runs finishes, the threads end.
        pool.shutdown(wait=True, cancel_futures=True)


def _ready(value: Any) -> bool:
    return not isinstance(value, Future) or value.done()


def _settled(item: Any, value: Any, error: Optional[InputError]) -> tuple:
    return item, (value.result() if isinstance(value, Future) else value), error
