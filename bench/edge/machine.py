"""Where a benchmark ran, for its results file: the commit of the code, the CPU, `lscpu | head`.

    from bench.edge.machine import cpu_info, lscpu_block, lscpu_head, source_commit
"""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def source_commit() -> str:
    """The commit the benchmarked code is at (and whether the tree had changes)."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True).stdout
    return (head or "unknown") + (" with uncommitted changes" if dirty.strip() else "")


def lscpu_head() -> str:
    try:
        done = subprocess.run(["lscpu"], capture_output=True, text=True)
    except OSError:
        return "lscpu not available"
    return "\n".join(done.stdout.splitlines()[:10]) if done.returncode == 0 else "lscpu not available"


def lscpu_block() -> list:
    """The report lines that show `lscpu | head` as a code block."""
    return ["`lscpu | head`:", "", "```", lscpu_head(), "```", ""]


def cpu_info() -> str:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), platform.processor())
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    simd = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags]
    return f"{name}, {os.cpu_count()} cores, flags {' '.join(simd) or 'none of avx2/avx512'}"
