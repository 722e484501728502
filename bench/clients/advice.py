"""Parity's client advice on a run, followed: does the command it names bring that client within 2 pp of the int8
model fed the pixel contract (#42 item 4)?

    .venv/bin/python bench/clients/advice.py RUN [RUN ...] >> bench/results/clients.md

For each exported RUN: `pipeline parity RUN` (the default gate; its verdict is not the question), its worst-client
line and each client's row with the float model fed alike. When the line names `pipeline export RUN ... --remedy
--clients NAME`, that command runs on a copy (RUN.advised, the run itself is left as it was), then parity again:
the client's gap to the contract before and after, whether advice is still given, the command's exit code and
seconds. A training advice is reported, not followed (tests/commands/advice/test_training.py follows it on digits). The
advice is read out of parity's own output, as tests/commands/advice/test_commands.py reads it.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.commands.advice.test_commands import advised  # noqa: E402  the tests' reading of a message's commands

WITHIN_PP = 2.0


def pipeline(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], capture_output=True, text=True, cwd=REPO)


def parity(run: Path) -> dict:
    """Parity's worst-client line and rows: {line, contract, clients: {name: (top1, float fed alike top1)}}."""
    done = pipeline("parity", run)
    report = json.loads((run / "parity" / "report.json").read_text())
    line = next((x for x in done.stdout.splitlines() if x.startswith("worst client: ")), "")
    clients = {name: (row["top1"], row.get("float_fed_alike", {}).get("top1"))
               for name, row in report.get("clients", {}).items() if "refused" not in row and name != "edgeflow"}
    return {"line": line, "contract": report["models"]["int8_cpu"]["top1"],
            "float": report["models"]["float_savedmodel"]["top1"], "clients": clients, "exit": done.returncode}


def rows(label: str, measured: dict) -> list:
    return [f"| {label} | {measured['float']:.4f} | {measured['contract']:.4f} | {name} | {top1:.4f} "
            f"({(top1 - measured['contract']) * 100:+.1f}) | {alike:.4f} | {'yes' if measured['line'] and advised(measured['line']) else 'no'} |"
            for name, (top1, alike) in measured["clients"].items()]


def follow(run: Path) -> list:
    before = parity(run)
    lines = [f"### {run.name}", "", f"before: `{before['line']}`", "",
             "| when | float | int8 (contract) | client | int8 as it feeds (pp vs contract) | float fed alike | advice |",
             "|---|---|---|---|---|---|---|", *rows("before", before)]
    commands = advised(before["line"])
    export = [c for c in commands if c.startswith("pipeline export RUN") and "--clients" in c]
    if not export:
        return lines + ["", f"advice followed: none ({'training: ' + '; '.join(commands) if commands else 'no advice'})", ""]
    copy = run.with_name(run.name + ".advised")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run, copy)
    start = time.monotonic()
    done = pipeline(*[str(copy) if w == "RUN" else w for w in shlex.split(export[0])[1:]])
    seconds = time.monotonic() - start
    after = parity(copy)
    client = shlex.split(export[0])[shlex.split(export[0]).index("--clients") + 1]
    top1 = after["clients"][client][0]
    verdict = "within" if (after["contract"] - top1) * 100 <= WITHIN_PP else "NOT within"
    chosen = json.loads((copy / "manifest.json").read_text()).get("remedy", {}).get("chosen")
    return lines + [*rows("after", after), "",
                    f"advice followed: `{export[0]}`: exit {done.returncode}, {seconds:.0f} s, chosen rung {chosen}; "
                    f"{client} {verdict} {WITHIN_PP:g} pp of the contract after it ({top1:.4f} against {after['contract']:.4f}); "
                    f"advice after: `{after['line'] or 'none'}`", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="exported runs (`pipeline export RUN --int8` done)")
    for run in parser.parse_args().runs:
        print("\n".join(follow(run)), flush=True)


if __name__ == "__main__":
    main()
