"""Decode the next images on worker threads while the interpreter runs, and post-process beside it: input order kept.

    from edge.files.prefetch import pipelined, prefetch
    for item, pixels, error in prefetch(paths, lambda p: load_pixels(p, (224, 224), name=str(p)), workers=2):
        ...   # pixels is None and error the InputError naming the file when that one could not be read
    for item, found, error in pipelined(paths, load, run=invoke_one, post=read_objects, post_on_workers=True):
        ...   # load on the workers, run here (one interpreter, one image at a time), post on the workers

Three stages per item: `load` (decode and resize) on the workers, `run` (set the input, invoke, copy the
outputs) on the calling thread, the one that owns the interpreter, and `post` (reading the outputs: scores,
boxes, a decode + NMS) either on the calling thread right after `run` or on the workers (`post_on_workers`),
whichever keeps the invoke busier: a cheap post costs less inline than a hand-over to a thread. The calling
thread does not sleep while it waits for the next image: it runs a load or post that no worker has started yet
(the same function, so the same answer), so with one worker per core beside it no core idles on a hand-over.
A stream whose next item may be slow to come (standard input: `feed`) is read on a thread of its own.

Pillow releases the GIL while it decodes and resizes, and the interpreter's invoke releases it too, so
threads run truly in parallel here (bench/results/edge_throughput.md). At most `ahead` images wait decoded
and at most `workers` post-processings wait to be handed back: memory stays bounded however many files
there are. Stopping the iteration early (a break, Ctrl-C, SIGTERM) cancels what has not started and waits
only for what is running (an image or so per worker): no worker outlives the command.
"""
from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from typing import Any, Callable, Deque, Iterable, Iterator, Optional, Tuple, TypeVar

from edge.errors import InputError
from edge.files.workers import checked_workers

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
    `workers` threads (None: one per available core, edge.files.workers) at most `ahead` items ahead.

    Only InputError (a file the pixel contract cannot take) is handed back per item; anything else
    is a bug or a machine fault and propagates.
    """
    return pipelined(items, load, ahead=ahead, workers=workers)


def pipelined(items: Iterable[T], load: Callable[[T], Any], run: Optional[Callable[[T, Any], Any]] = None,
              post: Optional[Callable[[T, Any], Any]] = None, *, workers: Optional[int] = None, ahead: Optional[int] = None,
              post_on_workers: bool = False, feed: bool = False) -> Iterator[Tuple[T, Any, Optional[InputError]]]:
    """(item, post(item, run(item, load(item))), None) per item in the order of `items` (a missing `run` or `post`
    passes its input on), or (item, None, the InputError `load` raised). `load` runs on `workers` threads (None:
    one per available core), `run` on the calling thread one item at a time, `post` on the workers when
    `post_on_workers`, else on the calling thread right after `run`. Errors other than load's InputError propagate.

    While the calling thread waits for the next item's load, it does a load or post that no worker has started yet
    itself (the oldest post first, then the nearest load): a thread that would sleep works instead, so a worker that
    falls behind is helped and the cores stay busy. With `feed`, `items` is read on a thread of its own (a stream
    that may block, such as standard input): items that arrived are worked on while the next one is awaited."""
    workers = checked_workers(workers)
    ahead = look_ahead(workers) if ahead is None else ahead
    if ahead < 1:
        raise ValueError(f"ahead {ahead}, expected 1 or more")
    source: Any = _Feeder(items, ahead) if feed else iter(items)
    loads: Deque[Tuple[T, _Job]] = deque()
    # Finished items in order: (item, value or a post-processing job, error).
    done: Deque[Tuple[T, Any, Optional[InputError]]] = deque()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="edge-decode")
    try:
        while True:
            while len(loads) < ahead:
                # A fed stream is awaited only when nothing else is in hand.
                item = source.next(wait=not loads and not done) if feed else next(source, _END)
                if item is _END:
                    break
                loads.append((item, _Job(pool, load, item)))
            if not loads:
                if feed and not source.ended:
                    while done:  # nothing to load until the stream says more: hand back what is finished
                        yield _settled(*done.popleft(), loads, done)
                    continue
                break
            item, job = loads[0]
            while not job.done() and _help(loads, done):
                pass
            loads.popleft()
            try:
                value = job.result()
            except InputError as err:
                done.append((item, None, err))
            else:
                if run is not None:
                    value = run(item, value)
                if post is not None:
                    value = _Job(pool, post, item, value) if post_on_workers else post(item, value)
                done.append((item, value, None))
            # Hand back every finished item at the front; wait for the oldest once `workers` are waiting.
            while done and (len(done) > workers or _ready(done[0][1])):
                yield _settled(*done.popleft(), loads, done)
        while done:
            yield _settled(*done.popleft(), loads, done)
    finally:
        # A stop (break, Ctrl-C, SIGTERM) lands here: nothing new starts, what runs finishes, the threads end.
        pool.shutdown(wait=True, cancel_futures=True)
        if feed:
            source.close()


class _Job:
    """One load or post handed to the pool, which the calling thread may take back and run itself while no worker has
    started it (`steal`): the same function on the same arguments, so the same answer wherever it ran."""

    __slots__ = ("fn", "args", "future", "here")

    def __init__(self, pool: ThreadPoolExecutor, fn: Callable[..., Any], *args: Any):
        self.fn, self.args = fn, args
        self.here: Optional[Tuple[Any, Optional[Exception]]] = None  # (value, error) when run on the calling thread
        self.future: Future = pool.submit(fn, *args)

    def steal(self) -> bool:
        """Run it on this thread if no worker has started it (True), else leave it to its worker (False); once run
        here it is not run again (a cancelled future says True to every cancel)."""
        if self.here is not None or not self.future.cancel():
            return False
        try:
            self.here = (self.fn(*self.args), None)
        except Exception as err:  # as a worker would keep it: result() raises it in order; Ctrl-C propagates now
            self.here = (None, err)
        return True

    def done(self) -> bool:
        return self.here is not None or self.future.done()

    def result(self) -> Any:
        if self.here is None:
            return self.future.result()
        value, error = self.here
        if error is not None:
            raise error
        return value


def _help(loads: Deque[Tuple[Any, _Job]], done: Deque[Tuple[Any, Any, Optional[InputError]]]) -> bool:
    """Run here one job no worker has started: the awaited load, else the oldest post, else the nearest load. False
    when every job is under way or finished (nothing to do but wait)."""
    if loads and loads[0][1].steal():
        return True
    for _, value, _ in done:
        if isinstance(value, _Job) and value.steal():
            return True
    return any(job.steal() for _, job in islice(loads, 1, None))


def _ready(value: Any) -> bool:
    return not isinstance(value, _Job) or value.done()


def _settled(item: Any, value: Any, error: Optional[InputError], loads: Deque, done: Deque) -> tuple:
    """The item with its post's result, helping with other jobs (or running this one here) while it is not ready."""
    if isinstance(value, _Job):
        while not value.done() and (value.steal() or _help(loads, done)):
            pass
        value = value.result()
    return item, value, error


class _Feeder:
    """`items` read on a daemon thread into a queue of at most `ahead`: the consumer takes what has arrived without
    blocking on the next (standard input waits for a line). An error while reading is raised in the consumer."""

    def __init__(self, items: Iterable[Any], ahead: int):
        self.queue: "queue.Queue[Any]" = queue.Queue(maxsize=ahead)
        self.ended = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(items,), name="edge-feed", daemon=True)
        self.thread.start()

    def _read(self, items: Iterable[Any]) -> None:
        try:
            for item in items:
                if self.stop.is_set():
                    return
                self.queue.put((item, None))
        except BaseException as err:  # handed to the consumer, which raises it
            self.queue.put((_END, err))
            return
        self.queue.put((_END, None))

    def next(self, wait: bool) -> Any:
        """The next item, _END when the stream ended (or, not waiting, when none has arrived yet: `ended` tells)."""
        if self.ended:
            return _END
        try:
            item, error = self.queue.get(block=wait)
        except queue.Empty:
            return _END
        if item is _END:
            self.ended = True
            if error is not None:
                raise error
        return item

    def close(self) -> None:
        """Stop reading: the thread ends at its next item (one blocked on a read ends with the process: a daemon)."""
        self.stop.set()
        try:
            self.queue.get_nowait()  # room for a put that waits, so the thread sees the stop
        except queue.Empty:
            pass
