"""The install extras: `gpu` pins what `host` pins, and every pin has a release for this machine.

A full resolver dry run (`pip install --dry-run ".[gpu]"`) is not done here: the registry serves no
separate metadata for these wheels, so pip would download every wheel to read its dependencies,
about 0.6 GB for TensorFlow and several GB of CUDA libraries. Instead: each pinned requirement is
looked up with `pip index versions` (which lists only releases installable on this platform and
Python), and TensorFlow's own metadata (the installed 2.21.0, the same release) gives the
`and-cuda` requirements, each of which must have a matching release.
"""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.helpers import REPO

pytestmark = pytest.mark.host

EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _applies(req: Requirement, machine: str) -> bool:
    return req.marker is None or req.marker.evaluate({"platform_machine": machine, "python_version": "3.11", "extra": ""})


def _pins(extra: str, machine: str = "x86_64") -> dict:
    return {Requirement(r).name: Requirement(r) for r in EXTRAS[extra] if _applies(Requirement(r), machine)}


def test_gpu_extra_pins_the_host_versions_with_cuda():
    host, gpu = _pins("host"), _pins("gpu")
    assert gpu["tensorflow"].extras == {"and-cuda"}
    assert str(gpu["tensorflow"].specifier) == str(host["tensorflow-cpu"].specifier) == "==2.21.0"
    for name, req in host.items():
        if name != "tensorflow-cpu":
            assert str(gpu[name].specifier) == str(req.specifier), name
    assert set(gpu) == (set(host) - {"tensorflow-cpu"}) | {"tensorflow"}


def test_readme_install_table_names_every_machine_and_extra():
    readme = (REPO / "README.md").read_text()
    for command in ('pip install -e ".[host]"', 'pip install -e ".[gpu]"', "tensorflow-tpu"):
        assert command in readme, command


@lru_cache(maxsize=None)
def _released(name: str) -> tuple:
    """Versions of `name` installable here, from the configured registry (pip's own client)."""
    result = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name], capture_output=True, text=True, timeout=60)
    lines = [line for line in result.stdout.splitlines() if line.startswith("Available versions:")]
    if result.returncode != 0 or not lines:
        if "No matching distribution" in result.stderr:
            return ()
        pytest.skip(f"package registry not reachable for {name}: {result.stderr.strip()[-200:]}")
    return tuple(Version(v.strip()) for v in lines[0].split(":", 1)[1].split(","))


def _check_released(requirements) -> list:
    with ThreadPoolExecutor(4) as pool:
        found = dict(zip([r.name for r in requirements], pool.map(_released, [r.name for r in requirements])))
    return [f"{r}: released {', '.join(map(str, found[r.name][:5])) or 'nothing'} for this machine"
            for r in requirements if not any(r.specifier.contains(v, prereleases=True) for v in found[r.name])]


@pytest.mark.parametrize("extra", ["host", "gpu"])
def test_every_pin_of_the_extra_has_a_release_for_this_machine(extra):
    pinned = [r for r in _pins(extra).values() if r.specifier]
    assert pinned
    assert _check_released(pinned) == []


def test_tensorflow_and_cuda_requirements_have_releases():
    tf = importlib.metadata.distribution("tensorflow")
    assert tf.version == "2.21.0"  # the release the gpu extra pins: its metadata is the one pip would read
    assert "and-cuda" in tf.metadata.get_all("Provides-Extra")
    cuda = [Requirement(r) for r in tf.requires if "and-cuda" in r]
    cuda = [r for r in cuda if r.marker.evaluate({"extra": "and-cuda", "platform_machine": "x86_64", "sys_platform": "linux"})]
    assert len(cuda) >= 8
    assert _check_released(cuda) == []
