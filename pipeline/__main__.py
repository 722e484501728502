"""`python -m pipeline` = the `pipeline` command (the console script calls `main` here too).

Ctrl-C while the command's own modules are still being imported ends with exit 130 and one line,
as it does once a command runs (edge.errors.exits_cleanly), not with a traceback.
"""
import os
import sys


def main() -> None:
    from pipeline.python_range import refuse_unsupported

    refuse_unsupported()
    try:
        from pipeline.cli import main as command
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C) while starting; nothing was written", file=sys.stderr)
        sys.exit(130)
    try:
        command()
    except SystemExit as done:  # click ends every command so, 0 included
        if done.code is None or isinstance(done.code, int):
            _end_now(done.code or 0)
        raise


def _end_now(code: int) -> None:
    """A command that has ended (done, refused, or stopped and rolled back) ends the process now, without the
    interpreter's teardown: what it wrote is already durable (fsynced, committed) and its own files closed, and
    what it said is flushed here. The teardown frees TensorFlow's objects one by one, about 1 s after a training
    (bench/results/train.md, step 4); after a stop it would wait for library threads the user just asked to stop,
    and once in the fault battery (tests/faults/test_faults.py) it aborted in native code after a clean Ctrl-C ("Fatal
    Python error: PyThreadState_Get ... Python runtime state: finalizing", exit 134 instead of 130)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: nothing more can be said
    os._exit(code)


if __name__ == "__main__":
    main()
