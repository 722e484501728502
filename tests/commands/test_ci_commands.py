""".ci/run runs the README's first two commands word for word: it reads them from README.md, so check what it reads."""
from __future__ import annotations

import re
import subprocess

from tests.support.helpers import REPO


def _ci_reads(n: int) -> str:
    script = (REPO / ".ci" / "run").read_text()
    function = re.search(r"^readme_command\(\) \{.*?^\}$", script, re.M | re.S).group(0)
    done = subprocess.run(["bash", "-c", f"{function}\nreadme_command {n}"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.rstrip("\n")


def test_ci_runs_the_readmes_first_two_commands_as_written():
    block = re.search(r"^```bash\n(.*?)^```$", (REPO / "README.md").read_text(), re.M | re.S).group(1).splitlines()
    for n in (1, 2):
        heading = next(i for i, line in enumerate(block) if line.startswith(f"# {n}. "))
        assert _ci_reads(n) == block[heading + 1] and block[heading + 1].startswith("python3 -m venv .venv")
    assert _ci_reads(3) == ""  # only the first block's numbered commands, nothing from later examples


def test_command_1_installs_nothing_but_the_host_extra():
    """What a new user runs first needs no second environment, variable or system package."""
    command = _ci_reads(1)
    assert command == 'python3 -m venv .venv && .venv/bin/pip install -q -e ".[host]" && .venv/bin/pipeline run --out runs/digits'
    script = (REPO / ".ci" / "run").read_text()
    assert script.index('bash -euo pipefail -c "$command1"') < script.index("apt-get install") < script.index(
        'bash -euo pipefail -c "$command2"')
