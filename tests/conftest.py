"""Markers for hardware and tools: tests that need what this machine lacks are skipped, with the reason."""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest


def _has_tensorflow() -> bool:
    return importlib.util.find_spec("tensorflow") is not None


# A Coral by its USB ids (the USB Accelerator shows up as Global Unichip 1a6e:089a until its runtime first
# loads, then as Google 18d1:9302) or, for the PCIe and M.2 modules, by the apex driver's device files.
CORAL_USB_IDS = ("18d1:9302", "1a6e:089a")


def _coral_usb_ids(lsusb_output: str) -> list:
    """The Coral USB ids that `lsusb` lists ("Bus 002 Device 003: ID 18d1:9302 Google Inc." lines)."""
    found = [i.lower() for i in re.findall(r"\bID ([0-9a-f]{4}:[0-9a-f]{4})\b", lsusb_output, re.IGNORECASE)]
    return [i for i in found if i in CORAL_USB_IDS]


def _edgetpu_missing() -> str:
    """Why the edgetpu tests cannot run here (naming the check that found nothing), or "" when they can."""
    apex = sorted(glob.glob("/dev/apex_*"))
    lsusb = shutil.which("lsusb")
    usb = _coral_usb_ids(subprocess.run([lsusb], capture_output=True, text=True).stdout) if lsusb else []
    if not apex and not usb:
        listed = (f"`lsusb` lists neither {' nor '.join(CORAL_USB_IDS)}" if lsusb
                  else "no `lsusb` on PATH to list USB ids (usbutils)")
        return f"needs a Coral Edge TPU: {listed}, and there is no /dev/apex_* (PCIe/M.2 Coral)"
    try:
        import ctypes

        ctypes.CDLL("libedgetpu.so.1")
    except OSError as err:
        return f"a Coral is present ({', '.join(apex + usb)}) but libedgetpu.so.1 cannot be loaded: {err}"
    return ""


_SKIPS = {
    "host": (lambda: not _has_tensorflow(), "needs TensorFlow (the host side); this is the TensorFlow-free device environment"),
    "compiler": (lambda: shutil.which("edgetpu_compiler") is None, "needs Google's edgetpu_compiler on PATH (x86-64 Linux, Coral apt repository)"),
    "edgetpu": (_edgetpu_missing, None),  # the reason names the check that found nothing
    "tpu": (lambda: not os.environ.get("TPU_NAME"), "needs a Cloud TPU named by TPU_NAME"),
}


def pytest_configure(config):
    # `--dist loadfile` hands each xdist worker a whole file at a time, by default the files with the most tests
    # first; a file of few tests behind one long fixture then starts last and one worker finishes minutes after the
    # other. Keep the order `slow_files_first` gives instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def slow_files_first(items) -> None:
    """Order ITEMS so the files with the most `slow` tests come first (stable: each file's tests stay together and
    in order), so the two workers of `-n 2 --dist loadfile` start the long files early and finish together."""
    from collections import Counter

    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])


def pytest_collection_modifyitems(config, items):
    from tests.support.deselected import deselect

    deselect(config, items)
    slow_files_first(items)
    cache = {}
    for item in items:
        for marker, (absent, reason) in _SKIPS.items():
            # the marker itself, not item.keywords: keywords hold the test's folder names too (tests/pipeline/edgetpu/)
            if item.get_closest_marker(marker):
                if marker not in cache:
                    found = absent()  # True or a reason of its own (a non-empty string) when the test cannot run
                    cache[marker] = found if isinstance(found, str) else (reason if found else "")
                if cache[marker]:
                    item.add_marker(pytest.mark.skip(reason=cache[marker]))


def pytest_report_header(config):
    from tests.support.deselected import header

    return header()


def pytest_terminal_summary(terminalreporter):
    from tests.support.deselected import summary

    summary(terminalreporter)


@pytest.fixture(autouse=True)
def signals_left_as_found():
    """Every test leaves this process's SIGINT and SIGTERM handlers, and edge's record of stops, as it found them.

    A pytest worker runs many tests in one process: a handler one test leaves behind, or a stop it leaves recorded,
    turns a later test's own signal (or its in-process training's stop check) into the worker's KeyboardInterrupt,
    which ends the whole worker ("[gw0] node down: keyboard-interrupt"). A test that leaves either is put right, so
    the next test starts clean, and fails naming what it left."""
    from edge import errors

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    left = {signal.Signals(signum).name: handler for signum, handler in before.items()
            if signal.getsignal(signum) is not handler}
    stops = list(errors._stops)
    for signum, handler in before.items():
        if handler is not None:
            signal.signal(signum, handler)
    errors._stops.clear()
    assert not left and not stops, (f"the test left signal handlers changed ({', '.join(left)}) or a stop recorded "
                                     f"({stops}): a later test in this worker would be interrupted by it")


@pytest.fixture
def ctrl_c_as_at_a_terminal():
    """For a test that sends SIGINT to a process it starts: the process begins with SIGINT at its default even when
    pytest was started with SIGINT ignored (tests/support/signal_moments.py)."""
    from tests.support.signal_moments import ctrl_c_as_at_a_terminal

    with ctrl_c_as_at_a_terminal():
        yield


@pytest.fixture(scope="session")
def session_folder(tmp_path_factory) -> Path:
    """A folder all xdist workers of this pytest session share, new each session (tests/support/session_cache.py)."""
    from tests.support.session_cache import session_root

    return session_root(tmp_path_factory)


def _train_digits(folder: Path) -> None:
    from pipeline import train

    train.train_model(train.TrainConfig(data="digits", image_size=16, epochs=4), folder / "run")


def _export_digits(trained: Path, folder: Path) -> None:
    from pipeline import export

    run_dir = folder / "run"
    shutil.copytree(trained, run_dir)
    export.export_model(export.ExportConfig(mode=export.Mode.FLOAT32), run_dir)
    export.export_model(export.ExportConfig(mode=export.Mode.INT8), run_dir)


@pytest.fixture(scope="session")
def trained_digits(session_folder):
    """One tiny trained run (small_cnn, digits, 16x16, 4 epochs), not exported: trained once per session for every
    xdist worker and shared read-only by the tests of export, the remedy ladder and (exported) the later stages.

    Tests that change a run work on a copy (`shutil.copytree`)."""
    from tests.support.session_cache import built_once

    return built_once(session_folder / "trained", _train_digits) / "run"


@pytest.fixture(scope="session")
def exported_run(session_folder, trained_digits):
    """`trained_digits` with float and int8 TFLite exports, shared read-only by later-stage tests (exported once
    per session, for every xdist worker).

    Tests that change a run work on a copy (`shutil.copytree`).
    """
    from tests.support.session_cache import built_once

    return built_once(session_folder / "exported", lambda folder: _export_digits(trained_digits, folder)) / "run"


@pytest.fixture
def exported_copy(exported_run, tmp_path):
    """A copy of `exported_run` that a test may change (or check is left unchanged)."""
    dst = tmp_path / "exported_copy"
    shutil.copytree(exported_run, dst)
    return dst


@pytest.fixture
def existing_run_dir(tmp_path):
    """A RUN folder that already holds a user's file, which a failed train must leave alone."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("keep me")
    return run_dir
