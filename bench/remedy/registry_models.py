"""Does a registry model other than MobileNetV2 0.35 fail the default int8 gate? Train it from scratch on data
nobody made for the purpose, export it as edgeflow does by default and per tensor, gate it, and run the ladder
where the gate fails.

    .venv/bin/python bench/remedy/registry_models.py --data photos --model xception [--seed 0] [--size 96] [--alpha A]
    .venv/bin/python bench/remedy/registry_models.py --data photos --model mobilenet_v3_large --option minimalistic=0
    .venv/bin/python bench/remedy/registry_models.py --write            writes bench/results/remedy_models.md

Data: `photos`, the camera-JPEG folders of tests/support/helpers.py (4 classes, 240 training JPEGs, 160 held-out), or
`flowers`, TFRecords in the Kaggle TPU flowers schema from tests/support/helpers.py (3 classes, 240 training records
seed 0, 180 held-out records seed 1). The model is trained once per (data, model, size, seed) into
RUNS/DATA/MODEL-SIZE-sSEED.trained (15 epochs, `pipeline train --seed SEED`; mobilenet_v2 at --alpha, default
1.0; other model options, `--option KEY=VALUE`, through a config file's `model_options`); for each export (defaults, --per-tensor, --per-tensor --calibration-samples 8) one copy gets `pipeline export RUN --int8 OPTIONS` then `pipeline parity RUN` (default gate), and
when that fails, another copy gets the same with --remedy. Each case is saved as RUNS/cases/NAME.json as it ends.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.remedy.ladder import REPO, export_and_parity, ladder_table, photo_folders, pipeline  # noqa: E402

# The default export, per-tensor weights, and per-tensor on the user's 8 calibration images (the failing
# non-default case of bench/results/remedy.md), for where the first two pass.
EXPORTS = ([], ["--per-tensor"], ["--per-tensor", "--calibration-samples", "8"])


def flower_records(runs: Path) -> tuple:
    """Globs of RUNS/flowers/{train,val}: 80 records per class seed 0, 60 per class seed 1; made once."""
    sys.path.insert(0, str(REPO))
    from tests.support.helpers import write_kaggle_tfrecords

    root = runs / "flowers"
    if not (root / "val").is_dir():
        write_kaggle_tfrecords(root / "train", per_class=80, seed=0)
        write_kaggle_tfrecords(root / "val", per_class=60, seed=1)
    return str(root / "train" / "train-*.tfrec"), str(root / "val" / "train-*.tfrec")


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def model_label(model: str, alpha: float, options: dict = None) -> str:
    label = model if alpha == 1.0 else f"{model}_a{alpha}"
    return label + "".join(f"_{key}{value:g}" for key, value in sorted((options or {}).items()))


def model_options(given: list) -> dict:
    """`--option KEY=VALUE` arguments as the config file's model_options (numbers, as the registry takes them)."""
    options = {}
    for item in given:
        key, sep, value = item.partition("=")
        try:
            if not (key and sep):
                raise ValueError(item)
            options[key] = float(value)
        except ValueError:
            raise SystemExit(f"--option {item!r}, expected KEY=NUMBER, e.g. minimalistic=0") from None
    return options


def train(runs: Path, data: str, model: str, size: int, seed: int, epochs: int, alpha: float, options: dict) -> tuple:
    if data == "photos":
        photos = photo_folders(runs)
        train_spec, val_spec = str(photos / "train"), str(photos / "val")
    else:
        train_spec, val_spec = flower_records(runs)
    out = runs / data / f"{model_label(model, alpha, options)}-{size}-s{seed}.trained"
    facts = out / "bench-train.json"
    if not facts.exists():
        config = []
        if options:
            path = runs / data / f"{model_label(model, alpha, options)}.options.json"
            path.write_text(json.dumps({"model_options": options}))
            config = ["--config", str(path)]
        start, before = time.monotonic(), load()
        pipeline("train", *config, "--data", train_spec, "--val-data", val_spec, "--model", model,
                 *(["--alpha", str(alpha)] if model == "mobilenet_v2" else []), "--image-size", str(size), "--epochs", str(epochs),
                 "--seed", str(seed), "--out", str(out), "--no-tensorboard")
        facts.write_text(json.dumps({"seconds": round(time.monotonic() - start, 1), "load_before": before,
                                     "load_after": load()}))
    return out, json.loads(facts.read_text())


def one_case(runs: Path, data: str, model: str, size: int, seed: int, epochs: int, alpha: float, options: dict,
             earlier: dict, exports: tuple = EXPORTS, remedy: bool = True) -> dict:
    """Train (or reuse) the model and run every export of `exports` that `earlier` (this case's saved JSON) lacks;
    with `remedy`, a failing export is run again with --remedy."""
    source, training = train(runs, data, model, size, seed, epochs, alpha, options)
    case = {"data": data, "model": model_label(model, alpha, options), "size": size, "seed": seed, "epochs": epochs, "train": training,
            "exports": list(earlier.get("exports", []))}
    done = [e["options"] for e in case["exports"]]
    for options in (o for o in exports if o not in done):
        stem = source.with_suffix("").name + "".join(options).replace("--", "-")
        entry = {"options": options, "load_before": load(),
                 "default": export_and_parity(source, source.parent / f"{stem}-default", options, remedy=False)}
        if remedy and not entry["default"]["passed"]:
            entry["remedy"] = export_and_parity(source, source.parent / f"{stem}-remedy", options, remedy=True)
        entry["load_after"] = load()
        case["exports"].append(entry)
        print(json.dumps({k: v for k, v in entry.items() if k != "remedy"}), flush=True)
    return case


def commands_of(case: dict) -> list:
    """The commands that measured a saved case (cases saved before this list kept one, as "command")."""
    return case.get("commands", [case["command"]] if "command" in case else [])


def _gate(r: dict) -> str:
    return "pass" if r["passed"] else "**FAIL**"


RESULTS = REPO / "bench" / "results" / "remedy_models.md"


def earlier_results(cases: list) -> tuple:
    """From the results file as it stands: the commands, table rows and ladder sections of the cases that
    RUNS/cases does not hold (measured on another machine or checkout), so a rewrite keeps them."""
    if not RESULTS.exists():
        return [], [], []
    text = RESULTS.read_text()
    ours = {(c["data"], c["model"], str(c["size"]), str(c["seed"])) for c in cases}
    lines = text.splitlines()
    commands = [line.strip() for line in lines[lines.index("Commands:") + 1:] if line.startswith("    ")]
    commands = commands[:next((i for i, c in enumerate(commands) if not c.startswith(".venv")), len(commands))]
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| data |")
            and tuple(cell.strip() for cell in line.split("|")[1:5]) not in ours]
    ladders = []
    for section in text.split("\n### Ladder: ")[1:]:
        head = re.match(r"(\S+) (\S+) (\d+) px seed (\d+),", section)
        if head and head.groups() not in ours:
            ladders.append("### Ladder: " + section.rstrip("\n"))
    return commands, rows, ladders


def write(cases: list, commands: list) -> None:
    old_commands, old_rows, old_ladders = earlier_results(cases)
    commands = list(dict.fromkeys(old_commands + commands))
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()[:20]
    lines = ["# Registry models against the default int8 gate (`pipeline export RUN --int8` then `pipeline parity RUN`)", "",
             "Commands:", "", *[f"    {c}" for c in commands], "",
             f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {platform.python_version()}, "
             f"{os.cpu_count()} CPUs shared with other helpers' jobs (load averages per row)."
             + (" Rows, commands and ladders of cases this checkout's runs do not hold are kept as the earlier file had them "
                "(measured earlier, on the same kind of machine)." if old_rows else ""), "", "```", *cpu, "```", "",
             "Gate (defaults): top-1 drop <= 1 pp and agreement >= 0.98. photos: 160 held-out JPEGs (1 image = 0.625 pp); "
             "flowers: 180 held-out records (1 image = 0.556 pp). max |Δscore|: largest difference of a class score, "
             "int8 vs float SavedModel, over the held-out images.", "",
             "| data | model | px | seed | train s (load) | export | float top-1 | int8 top-1 | drop pp | agreement | "
             "max \\|Δscore\\| | gate | export s | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", *old_rows]
    for c in cases:
        t = c["train"]
        for e in c["exports"]:
            d = e["default"]
            lines.append(f"| {c['data']} | {c['model']} | {c['size']} | {c['seed']} | {t['seconds']:.0f} ({t['load_before']}) | "
                         f"{' '.join(e['options']) or 'defaults'} | {d['float']:.4f} | {d['int8']:.4f} | {d['drop_pp']:.2f} | "
                         f"{d['agreement']:.4f} ({d['agree']}/{d['images']}) | {d.get('score_error_max', float('nan')):.3f} | "
                         f"{_gate(d)} | {d['export_seconds']} | {e['load_before']} -> {e['load_after']} |")
    for ladder in old_ladders:
        lines += ["", *ladder.splitlines()]
    for c in cases:
        for e in c["exports"]:
            if "remedy" not in e:
                continue
            m = e["remedy"]
            ladder = m["ladder"]
            split = ladder["tuning_split"]
            lines += ["", f"### Ladder: {c['data']} {c['model']} {c['size']} px seed {c['seed']}, "
                      f"`{' '.join(['--int8', *e['options'], '--remedy'])}`", "",
                      f"Tuning split: {split['images']} training images x {split.get('views_per_image', 1)} views = "
                      f"{split.get('scored', split['images'])} scored. Export exit {m['exit']}, {m['export_seconds']} s "
                      f"(as asked: {e['default']['export_seconds']} s). Chosen: **{ladder['chosen']}**; its held-out "
                      f"(`pipeline parity`): int8 {m['int8']:.4f}, drop {m['drop_pp']:.2f} pp, agreement "
                      f"{m['agreement']:.4f} ({m['agree']}/{m['images']}), gate {_gate(m)}.", "",
                      *ladder_table(ladder)]
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=Path, default=REPO / "runs" / "bench_remedy_models")
    parser.add_argument("--data", choices=("photos", "flowers"), default="photos")
    parser.add_argument("--model", default=None)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--alpha", type=float, default=1.0, help="mobilenet_v2's width multiplier")
    parser.add_argument("--option", action="append", default=[], help="a model option KEY=VALUE (the config file's "
                        "model_options), e.g. minimalistic=0; repeatable")
    parser.add_argument("--options", default=None, help="one export's options instead of EXPORTS, e.g. "
                        "'--per-tensor --calibration-samples 1'; '' for the default export alone")
    parser.add_argument("--no-remedy", action="store_true", help="gate each export only; no --remedy run where it fails")
    parser.add_argument("--write", action="store_true", help="rewrite the results from RUNS/cases/*.json")
    args = parser.parse_args()
    cases_dir = args.runs / "cases"
    cases_dir.mkdir(parents=True, exist_ok=True)
    if args.model:
        command = shlex.join([".venv/bin/python", "bench/remedy/registry_models.py", *sys.argv[1:]])
        options = model_options(args.option)
        saved = cases_dir / f"{args.data}-{model_label(args.model, args.alpha, options)}-{args.size}-s{args.seed}.json"
        earlier = json.loads(saved.read_text()) if saved.exists() else {}
        case = one_case(args.runs, args.data, args.model, args.size, args.seed, args.epochs, args.alpha, options, earlier,
                        (args.options.split(),) if args.options is not None else EXPORTS, remedy=not args.no_remedy)
        case["commands"] = commands_of(earlier) + [command]
        saved.write_text(json.dumps(case))
    if args.write:
        cases = [json.loads(p.read_text()) for p in sorted(cases_dir.glob("*.json"))]
        write(cases, [c for case in cases for c in dict.fromkeys(commands_of(case))])


if __name__ == "__main__":
    main()
