"""Which Edge TPU route is taken: Google's pycoral when it is really Google's, else load_delegate, else a clear error."""
from __future__ import annotations

import pytest

from edge import EdgeTpuUnavailable, make_interpreter
from edge.model.interpreter import _google_pycoral_edgetpu
from tests.support.edge_paths import EDGETPU


@pytest.fixture
def fake_pycoral(fake_packages):
    """Put a `pycoral` package of our making first on sys.path, and forget it afterwards."""
    return fake_packages


def test_pypi_pycoral_is_not_mistaken_for_googles(fake_pycoral):
    # PyPI's `pycoral` is a coral-reef atlas CLI: no pycoral.utils.edgetpu.
    fake_pycoral({"pycoral/__init__.py": "ATLAS = True\n", "pycoral/cli.py": ""})
    assert _google_pycoral_edgetpu() is None
    with pytest.raises(EdgeTpuUnavailable, match="libedgetpu1-std"):
        make_interpreter(EDGETPU)


def test_googles_pycoral_is_used_and_its_failure_is_a_clear_error(fake_pycoral):
    fake_pycoral({
        "pycoral/__init__.py": "",
        "pycoral/utils/__init__.py": "",
        "pycoral/utils/edgetpu.py": (
            "CALLS = []\n"
            "def make_interpreter(model, device=None):\n"
            "    CALLS.append((type(model).__name__, device))\n"
            "    raise ValueError('Failed to load delegate from libedgetpu.so.1')\n"
        ),
    })
    module = _google_pycoral_edgetpu()
    assert module is not None
    with pytest.raises(EdgeTpuUnavailable, match="no Edge TPU could be opened .*Failed to load delegate"):
        make_interpreter(EDGETPU, device="usb")
    assert module.CALLS == [("bytes", "usb")]  # the checked bytes, not the path, went to pycoral
