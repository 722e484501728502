"""The remedy ladder on models trained from scratch on camera-like photo crops: default drop, each rung, the chosen one.

    .venv/bin/python bench/remedy/ladder.py [--runs DIR]      writes bench/results/remedy_bench.md

The photo folders of tests/support/helpers.py (write_camera_jpegs(halves=True): 4 classes, 240 training JPEGs seed 0,
160 held-out JPEGs seed 1), MobileNetV2 alpha 0.35 and MobileNetV3 Small at 96 px, 15 epochs from scratch
(trained once into DIR, default runs/bench_remedy, and reused). For each case (a model and the export's
options): `pipeline export RUN --int8 OPTIONS` then `pipeline parity RUN` on one copy of the run (the default's
held-out drop), and `pipeline export RUN --int8 OPTIONS --remedy` then `pipeline parity RUN` on another (every
rung the ladder tried, on the tuning split, and the chosen model's held-out drop), with the seconds each took.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS = {"mobilenet_v2": ["--model", "mobilenet_v2", "--alpha", "0.35"], "mobilenet_v3_small": ["--model", "mobilenet_v3_small"]}
CASES = (
    ("mobilenet_v2", []),
    ("mobilenet_v2", ["--per-tensor"]),
    ("mobilenet_v2", ["--per-tensor", "--calibration-samples", "8"]),
    ("mobilenet_v3_small", []),
    ("mobilenet_v3_small", ["--per-tensor", "--calibration-samples", "8"]),
)


def pipeline(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if check and done.returncode not in (0, 1):
        raise SystemExit(f"pipeline {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def photo_folders(runs: Path) -> Path:
    """RUNS/photos/{train,val}: 240 training JPEGs (seed 0) and 160 held-out ones (seed 1), 4 classes; made once."""
    sys.path.insert(0, str(REPO))
    from tests.support.helpers import write_camera_jpegs

    photos = runs / "photos"
    if not (photos / "val").is_dir():
        write_camera_jpegs(photos / "train", per_class=60, seed=0, halves=True)
        write_camera_jpegs(photos / "val", per_class=40, seed=1, halves=True)
    return photos


def trained(runs: Path, model: str) -> Path:
    photos = photo_folders(runs)
    out = runs / f"{model}.trained"
    if not (out / "manifest.json").exists():
        pipeline("train", "--data", str(photos / "train"), "--val-data", str(photos / "val"), *MODELS[model],
                 "--image-size", "96", "--epochs", "15", "--out", str(out))
    return out


def held_out(run: Path) -> dict:
    report = json.loads((run / "parity" / "report.json").read_text())
    f, q = report["models"]["float_savedmodel"], report["models"]["int8_cpu"]
    return {"float": f["top1"], "int8": q["top1"], "drop_pp": q["drop_pp"], "agreement": q["agreement"],
            "agree": q["agree"], "images": q["images"], "score_error_max": q.get("score_error_max"),
            "passed": report["gate"]["passed"]}


def export_and_parity(source: Path, run: Path, options: list, remedy: bool) -> dict:
    """Copy the trained run `source` to `run`, `pipeline export RUN --int8 OPTIONS [--remedy]`, then `pipeline
    parity RUN`: the export's seconds and exit code, the held-out numbers, and with --remedy the ladder's record."""
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(source, run)
    start = time.monotonic()
    exported = pipeline("export", str(run), "--int8", *options, *(["--remedy"] if remedy else []))
    seconds = time.monotonic() - start
    pipeline("parity", str(run))
    out = {"export_seconds": round(seconds, 1), "exit": exported.returncode, **held_out(run)}
    if remedy:
        out["ladder"] = json.loads((run / "manifest.json").read_text())["remedy"]
    return out


def one_case(runs: Path, model: str, options: list) -> dict:
    source = trained(runs, model)
    name = model + "".join(options).replace("--", "-")
    out = {"model": model, "options": options}
    for remedy in (False, True):
        run = runs / (name + ("-remedy" if remedy else "-default"))
        out["remedy" if remedy else "default"] = export_and_parity(source, run, options, remedy)
    return out


def write(results: list, command: str) -> None:
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()[:20]
    lines = ["# The remedy ladder (`pipeline export RUN --int8 --remedy`)", "",
             f"Command: `{command}`  ",
             f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {platform.python_version()}, "
             f"{os.cpu_count()} CPUs shared with other jobs", "", "```", *cpu, "```", "",
             "Held-out: the 160 photo crops parity reports on (1 image = 0.625 pp). Gate: drop <= 1 pp, agreement >= 0.98.", "",
             "| model | options | float | default int8 | default drop pp | default agreement | gate | remedy chosen | "
             "remedy int8 | remedy drop pp | remedy agreement | gate | export s (default / remedy) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        d, m = r["default"], r["remedy"]
        lines.append(f"| {r['model']} | {' '.join(r['options']) or '(defaults)'} | {d['float']:.4f} | {d['int8']:.4f} | "
                     f"{d['drop_pp']:.2f} | {d['agreement']:.4f} ({d['agree']}/{d['images']}) | {'pass' if d['passed'] else 'FAIL'} | "
                     f"{m['ladder']['chosen']} | {m['int8']:.4f} | {m['drop_pp']:.2f} | {m['agreement']:.4f} ({m['agree']}/{m['images']}) | "
                     f"{'pass' if m['passed'] else 'FAIL'} | {d['export_seconds']} / {m['export_seconds']} |")
    lines += ["", "Each rung the ladder tried (on its tuning split of training images; seconds are the rung's own: "
              "convert, pre-flight, score):", ""]
    for r in results:
        ladder = r["remedy"]["ladder"]
        split = ladder["tuning_split"]
        lines += [f"{r['model']} {' '.join(r['options']) or '(defaults)'}, tuning split {split['images']} images x "
                  f"{split.get('views_per_image', 1)} views = {split.get('scored', split['images'])} scored:", "",
                  *ladder_table(ladder), ""]
    (REPO / "bench" / "results" / "remedy_bench.md").write_text("\n".join(lines))
    print("\n".join(lines))


def ladder_table(ladder: dict) -> list:
    """The manifest's remedy ladder as markdown lines: each attempt on the tuning split, then each skipped rung."""
    lines = ["| remedy | tuning top-1 | tuning agreement | gate | Edge TPU ops | bytes | seconds |", "|---|---|---|---|---|---|---|"]
    for a in ladder["attempts"]:
        if a.get("error"):
            lines.append(f"| {a['remedy']} | could not make a model: {a['error'][:120]} | | | | | {a['seconds']} |")
            continue
        lines.append(f"| {a['remedy']} | {a['tuning']['top1']:.4f} | {a['tuning']['agreement']:.4f} | "
                     f"{'pass' if a['passed'] else ('mapping lowered' if a['edgetpu']['lowered'] else 'fail')} | "
                     f"{a['edgetpu']['ops_on_edgetpu']}/{a['edgetpu']['total_ops']} | {a['size_bytes']:,} | {a['seconds']} |")
    return lines + [f"| {s['remedy']} | skipped: {s['why']} | | | | | |" for s in ladder.get("skipped", [])]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=Path, default=REPO / "runs" / "bench_remedy")
    parser.add_argument("--case", type=int, action="append", help="only these CASES (0-based); default all")
    parser.add_argument("--command", default=None, help="the command line to record (default: this one); with "
                        "--write-only, the one that measured the saved cases")
    parser.add_argument("--write-only", action="store_true", help="rewrite the results from DIR's saved cases")
    args = parser.parse_args()
    args.runs.mkdir(parents=True, exist_ok=True)
    command = args.command or " ".join([".venv/bin/python", "bench/remedy/ladder.py", *sys.argv[1:]])
    for i in [] if args.write_only else (args.case or range(len(CASES))):  # each case kept as it ends: cases may run in parallel processes
        (args.runs / f"case-{i}.json").write_text(json.dumps(one_case(args.runs, *CASES[i])))
    write([json.loads((args.runs / f"case-{i}.json").read_text()) for i in range(len(CASES))
           if (args.runs / f"case-{i}.json").exists()], command)


if __name__ == "__main__":
    main()
