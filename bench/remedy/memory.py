"""Peak memory of the remedy ladder, rung by rung: `pipeline export RUN --int8 --remedy [--clients ...]` in this
process, with the resident peak (VmHWM) read and reset (/proc/self/clear_refs) as each rung's row is made.

    .venv/bin/python bench/remedy/memory.py RUN [--clients pycoral,mediapipe] [--rungs calibration bias qat-2]
                                                      [--walk] [EXPORT OPTIONS, e.g. --per-tensor]

`--walk` fails every attempt on the tuning split (one added failure), so the ladder walks every rung whatever the
model: peak memory is the rungs', not the model's accuracy's.

RUN is copied first (the export writes into it). Prints one line per rung: its seconds and the peak resident
memory while it ran (from the previous row to its own): this process's (VmHWM), and the whole tree's, this process
and its children alive at once (the ladder's rungs run in children: pipeline/children/child.py), sampled every 0.2 s
two ways: VmRSS summed (a page two processes share counts twice: TensorFlow's libraries, about 370 MB, and what a
forked child shares with the process it was forked from) and Pss summed (each shared page split among the
processes that map it: what the tree holds, the figure for "within a laptop's memory"); then the whole export's. `/usr/bin/time -v` around
this command gives the process's peak too (the figure bench/results/remedy.md quotes). Linux only.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def peak_mb(reset: bool = True) -> float:
    """The resident peak since the last reset, in MB; reset it (writing 5 to clear_refs) when asked."""
    with open("/proc/self/status") as status:
        hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    if reset:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    return hwm / 1024.0


def _kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) for line in status if line.startswith(field + ":")), 0)
    except OSError:  # ended meanwhile
        return 0


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return next((int(line.split()[1]) for line in rollup if line.startswith("Pss:")), 0)
    except OSError:  # ended meanwhile
        return 0


def _descendants(root: int):
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, parent in parents.items() if parent == pid]
        found += children
        frontier += children
    return found


class TreeSampler(threading.Thread):
    """The resident memory of this process and its descendants summed (VmRSS, and Pss), sampled every 0.2 s: the
    peaks since the last `take()`, and each child's own peak (VmHWM) seen while it ran."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak = 0
        self.pss_peak = 0
        self.child_peak = {}
        self.lock = threading.Lock()

    def run(self):
        me = os.getpid()
        while True:
            children = _descendants(me)
            total = _kb(me, "VmRSS") + sum(_kb(c, "VmRSS") for c in children)
            pss = _pss_kb(me) + sum(_pss_kb(c) for c in children)
            with self.lock:
                self.peak = max(self.peak, total)
                self.pss_peak = max(self.pss_peak, pss)
                for c in children:
                    self.child_peak[c] = max(self.child_peak.get(c, 0), _kb(c, "VmHWM"))
            time.sleep(0.2)

    def take(self):
        """(the tree's peak MB as VmRSS summed, as Pss summed, the largest child's own peak MB) since the last take."""
        with self.lock:
            peak, pss, child = self.peak, self.pss_peak, max(self.child_peak.values(), default=0)
            self.peak, self.pss_peak, self.child_peak = 0, 0, {}
        return peak / 1024.0, pss / 1024.0, child / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--clients", default="")
    parser.add_argument("--rungs", nargs="*", default=None, help="only these rungs of the ladder, in its order")
    parser.add_argument("--walk", action="store_true", help="fail every attempt, so every rung runs")
    args, options = parser.parse_known_args()  # the rest: export options (--per-tensor, --calibration-samples N)

    from pipeline import export
    from pipeline.remedy import ladder as remedy

    options = [o for o in options if o != "--"]
    config = export.ExportConfig(mode=export.Mode.INT8, repair=True, per_tensor="--per-tensor" in options,
                                 calibration_samples=(int(options[options.index("--calibration-samples") + 1])
                                                      if "--calibration-samples" in options else None),
                                 clients=tuple(c for c in args.clients.split(",") if c))
    if args.rungs is not None:
        remedy.LADDER = tuple(r for r in remedy.LADDER if r.name in args.rungs)

    if args.walk:
        judged = remedy.tuning_failures
        remedy.tuning_failures = lambda *a, **k: judged(*a, **k) + ["walked: every rung is measured"]
    repair = remedy.repair
    last = [time.monotonic()]
    tree = TreeSampler()
    tree.start()

    def figures() -> str:
        whole, pss, child = tree.take()
        return f"{peak_mb():8.0f} MB {whole:8.0f} MB {pss:8.0f} MB {child:8.0f} MB"

    def say(line: str) -> None:
        now = time.monotonic()
        print(f"{figures()} {now - last[0]:7.1f} s  | {line}", flush=True)
        last[0] = now

    def repair_saying(*a, **k):
        k["say"] = say
        return repair(*a, **k)

    remedy.repair = repair_saying
    with tempfile.TemporaryDirectory(prefix="remedy-memory-") as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(args.run, copy)
        start = time.monotonic()
        figures()
        print(f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}; peak MB since the previous row (this process, "
              "the whole tree as VmRSS summed, as Pss summed, the largest child's own), seconds, row")
        result = export.export_model(config, copy)
        print(f"{figures()} {time.monotonic() - last[0]:7.1f} s  | the chosen model's report and files")
        print(result.table.split("\nchosen")[0].splitlines()[0])
        print(f"export {time.monotonic() - start:.0f} s; load {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
              f"failures: {list(result.failures)}")


if __name__ == "__main__":
    main()
