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
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.helpers import REPO
from tests.support.registry import unreached

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 and 3.9: the same parser, from PyPI (the test extra brings it there)
    import tomli as tomllib

pytestmark = pytest.mark.host

EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _applies(req: Requirement, machine: str) -> bool:
    return req.marker is None or req.marker.evaluate({"platform_machine": machine, "python_version": "3.11", "extra": ""})


def _pins(extra: str, machine: str = "x86_64") -> dict:
    return {Requirement(r).name: Requirement(r) for r in EXTRAS[extra] if _applies(Requirement(r), machine)}


def test_gpu_extra_pins_the_host_versions_with_cuda():
    host, gpu = _pins("host"), _pins("gpu")
    assert gpu["tensorflow"].extras == {"and-cuda"} and host["tensorflow"].extras == set()
    assert str(gpu["tensorflow"].specifier) == str(host["tensorflow"].specifier) == "==2.21.0"
    for name, req in host.items():
        assert str(gpu[name].specifier) == str(req.specifier), name
    assert set(gpu) == set(host)


# Distributions that each install the `tensorflow` package itself (site-packages/tensorflow/): any two
# of them in one environment overwrite each other's files. Add-ons (tensorflow-model-optimization,
# tensorflow-io, ...) install other packages and are not in this list.
TENSORFLOW_BUILDS = {"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos",
                     "tensorflow-tpu", "tensorflow-aarch64", "tensorflow-cpu-aws", "tensorflow-rocm", "tf-nightly",
                     "tf-nightly-cpu"}



def _installed_requirements(name: str) -> list:
    """Requires-Dist of the installed `name` (no extras), which must be the release the extras pin."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return []
    return [r for r in (dist.requires or []) if "extra ==" not in r and "extra==" not in r]


def _tensorflow_builds(requirements: list, machine: str) -> set:
    """The TensorFlow builds a set of requirements brings in on `machine`: named by them, or required,
    at any depth, by what they name (read from this environment's metadata of the pinned releases)."""
    builds, seen, todo = set(), set(), [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or not _applies(req, machine):
            continue
        seen.add(name)
        if name in TENSORFLOW_BUILDS:
            builds.add(name)
            continue  # a build's own requirements are TensorFlow's dependencies, not another build
        try:
            installed = importlib.metadata.distribution(name).version
        except importlib.metadata.PackageNotFoundError:
            continue
        assert not req.specifier or req.specifier.contains(installed, prereleases=True), \
            f"{name} {installed} is installed, the extra pins {req.specifier}: its metadata is not the pinned release's"
        todo += [Requirement(r) for r in _installed_requirements(name)]
    return builds


@pytest.mark.parametrize("machine", ["x86_64", "aarch64", "arm64"])
@pytest.mark.parametrize("extras", [("host",), ("gpu",), ("host", "gpu")], ids="+".join)
def test_extras_bring_exactly_one_tensorflow_build(extras, machine):
    """tf-keras requires `tensorflow` by name: an extra that also pins another build installs two."""
    requirements = [r for extra in extras for r in EXTRAS[extra]]
    assert _tensorflow_builds(requirements, machine) == {"tensorflow"}


def test_this_environment_has_one_tensorflow_build():
    """What a fresh `pip install -e ".[host]"` left: one distribution owns site-packages/tensorflow/."""
    owners = sorted(d.metadata["Name"] for d in importlib.metadata.distributions()
                    if any(f.parts[0] == "tensorflow" for f in (d.files or ())))
    if "tensorflow-tpu" in map(canonicalize_name, owners):
        pytest.skip("the README's TPU recipe puts tensorflow-tpu's files over `tensorflow` on purpose: " + ", ".join(owners))
    assert len(owners) == 1, f"distributions that each install site-packages/tensorflow/: {owners}"
    assert canonicalize_name(owners[0]) == "tensorflow"


def test_readme_install_table_names_every_machine_and_extra():
    readme = (REPO / "README.md").read_text()
    for command in ('pip install -e ".[host]"', 'pip install -e ".[gpu]"', "tensorflow-tpu"):
        assert command in readme, command


@lru_cache(maxsize=None)
def _released(name: str) -> tuple:
    """(versions of `name` installable here as the configured registries answered, pip's line saying one of them
    could not be reached or None). `-vv` makes pip say which address it failed to fetch and why; without it, a
    registry it could not reach and one that has no such package both end in "No matching distribution"."""
    result = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "-vv", name], capture_output=True,
                            text=True, timeout=120)
    lines = [line for line in result.stdout.splitlines() if line.startswith("Available versions:")]
    missing = unreached(result.stdout + result.stderr)
    if result.returncode == 0 and lines:
        return tuple(Version(v.strip()) for v in lines[0].split(":", 1)[1].split(",")), missing
    if "No matching distribution" in result.stderr:
        return (), missing  # answered "no release of it for this machine", unless `missing` says one was not reached
    pytest.fail(f"`pip index versions {name}` failed (exit {result.returncode}) for a reason other than an answer or an "
                f"unreachable registry:\n{result.stderr.strip()[-1500:]}")


def _check_released(requirements) -> list:
    """The requirements no release satisfies, as the registries answered; a skip when one that might hold it was not reached."""
    with ThreadPoolExecutor(4) as pool:
        found = dict(zip([r.name for r in requirements], pool.map(_released, [r.name for r in requirements])))
    unmet = [r for r in requirements if not any(r.specifier.contains(v, prereleases=True) for v in found[r.name][0])]
    unreachable = [f"{r.name}: {found[r.name][1]}" for r in unmet if found[r.name][1]]
    if unreachable:  # a release the unreached registry holds would have met the pin: nothing is known
        pytest.skip("the package registry could not be reached, so these pins are unchecked: " + "; ".join(unreachable))
    return [f"{r}: the registry answered that no such release exists for this machine (it has "
            f"{', '.join(map(str, found[r.name][0][:5])) or 'none'}); the pin is wrong" for r in unmet]


@pytest.mark.parametrize("extra", ["host", "gpu"])
def test_every_pin_of_the_extra_has_a_release_for_this_machine(extra):
    pinned = [r for r in _pins(extra).values() if r.specifier]
    assert pinned
    assert _check_released(pinned) == []


@pytest.mark.slow
def test_tensorflow_and_cuda_requirements_have_releases():
    tf = importlib.metadata.distribution("tensorflow")
    assert tf.version == "2.21.0"  # the release the gpu extra pins: its metadata is the one pip would read
    assert "and-cuda" in tf.metadata.get_all("Provides-Extra")
    cuda = [Requirement(r) for r in tf.requires if "and-cuda" in r]
    cuda = [r for r in cuda if r.marker.evaluate({"extra": "and-cuda", "platform_machine": "x86_64", "sys_platform": "linux"})]
    assert len(cuda) >= 8
    assert _check_released(cuda) == []


@pytest.mark.parametrize("code, stderr, outcome", [
    (3, "edge-env: no Python 3.9 found (expected pyenv 3.9.18 or python3.9 on PATH)", "skip"),
    (3, "edge-env: TensorFlow is importable in the device venv; expected a TensorFlow-free environment", "fail"),
    (1, "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by "
        "'NewConnectionError(...: Failed to establish a new connection: [Errno 101] Network is unreachable')': /simple/numpy/\n"
        "ERROR: No matching distribution found for numpy<2", "skip"),
    (1, "ERROR: Could not find a version that satisfies the requirement tflite-runtime==9.9 (from versions: 2.14.0)\n"
        "ERROR: No matching distribution found for tflite-runtime==9.9", "fail"),
    (0, "", "pass"),
])
def test_each_way_the_device_env_build_ends_has_its_own_outcome(code, stderr, outcome):
    """.ci/edge-env's exit 3 is a skip only for a missing Python 3.9; TensorFlow in the venv and a release the
    registry answered does not exist fail; an unreachable registry is a skip naming it."""
    import _pytest.outcomes

    from tests.support.device_env import judge

    try:
        judge(code, stderr)
        got = "pass"
    except _pytest.outcomes.Skipped as skipped:
        got = "skip"
        assert ("no Python 3.9" in skipped.msg) or ("could not be reached" in skipped.msg), skipped.msg
    except _pytest.outcomes.Failed:
        got = "fail"
    assert got == outcome
