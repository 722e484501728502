"""One step of an export run in a child process, so the memory it takes returns to the system when it ends.

    model = child.call(fine_tuned_conversion, config, run_path, what="the qat-2 rung's fine-tuning")

The remedy ladder's fine-tuning rungs build a quantization-aware model, its optimizer and a traced training step
(EfficientNetB0 at 96 px: +3 GB; bench/results/remedy.md section 13), and TensorFlow keeps much of it for the
process's life. Run in a child, none of it stays: the parent receives the result (plain data) and the child ends.

The child is forked from a fork server (`multiprocessing`'s forkserver), a clean process started once that has only
imported TensorFlow, Keras and the export stage (pipeline/children/server.py) and runs nothing: a child starts in
a fraction of a second instead of importing TensorFlow for about 10 s, shares the imported pages with the server (a
copy is made only of a page it writes), and no child is forked from a process that runs TensorFlow's thread pools
(unsafe). Where there is no fork server (not Linux) or no way to keep the current folder off its path (Python before
3.11), the child is spawned. Ctrl-C reaches the whole process group: the fork server and the child ignore it and the
parent, which raises as usual (130), ends the child, as it does on SIGTERM or any other way out; nothing the child
made is written by it. A child that ends without a result (killed, out of memory) is one PipelineError line naming
its exit; an error raised in the child is raised again here.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
from typing import Any, Callable

from pipeline.errors import PipelineError


def _context():
    if "forkserver" not in multiprocessing.get_all_start_methods() or sys.version_info < (3, 11):
        return multiprocessing.get_context("spawn")  # a spawned child's module path is this process's (see _start_server)
    context = multiprocessing.get_context("forkserver")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # the server imports tf.keras as the export stage does
    context.set_forkserver_preload(["pipeline.children.server"])  # read when the server starts (the first call)
    _start_server()
    return context


def _start_server() -> None:
    """Start the fork server (once) with this process's module path and without the folder the command runs in.

    The server is a new `python -c`, which puts the current folder first on its path and ignores the path it is sent,
    so a folder there named like one of our packages (or TensorFlow) would be imported in their place, by the server
    and so by every child. PYTHONSAFEPATH (Python 3.11+) keeps the current folder out; PYTHONPATH gives it our path."""
    from multiprocessing import forkserver

    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "PYTHONSAFEPATH")}
    os.environ.update(PYTHONPATH=os.pathsep.join(os.path.abspath(entry) for entry in sys.path if entry), PYTHONSAFEPATH="1")
    try:
        forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def call(function: Callable[..., Any], *args: Any, what: str) -> Any:
    """`function(*args)` in a child process; its return value (picklable), or its error raised here."""
    context = _context()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(send, function, args), daemon=True)
    process.start()
    send.close()  # the child holds the only sending end: its end reads as EOF here
    try:
        try:
            outcome, value = receive.recv()
        except EOFError:
            process.join()
            raise PipelineError(f"{what} ended without a result ({_exit(process.exitcode)}); "
                                "nothing of it was written") from None
        process.join()
    finally:
        if process.is_alive():  # Ctrl-C, SIGTERM or an error here: the child's work is no longer wanted
            process.kill()
            process.join()
        receive.close()
    if outcome == "error":
        raise value
    return value


def _exit(code) -> str:
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        return f"killed by {name}" + (", perhaps out of memory" if name == "SIGKILL" else "")
    return f"exit code {code}"


def _child(send, function: Callable[..., Any], args) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent reports Ctrl-C once and ends this process
    try:
        result = ("ok", function(*args))
    except BaseException as err:  # every error goes back to the parent, which says it as its own
        result = ("error", err)
        try:
            pickle.loads(pickle.dumps(err))  # the parent must be able to read it back
        except Exception:  # an error that cannot cross: its type and first line
            first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
            result = ("error", PipelineError(f"{type(err).__name__}: {first}".rstrip(": ")))
    try:
        send.send(result)
    except Exception as err:  # a result that cannot cross: the parent gets a line, not this process's traceback
        send.send(("error", PipelineError(f"{type(err).__name__} while returning the result: {err}")))
    send.close()
    os._exit(0)  # no interpreter teardown: TensorFlow's objects need not be freed one by one
