"""Whole `pipeline train` processes against the hand-written Kaggle recipe (bench/training/recipe_train.py), side by side.

    .venv/bin/python bench/training/train_process.py [--pairs 3] [--epochs 10 3] [--data-dir DIR]

Data, made on the fly (or reused from --data-dir): 1,024 camera-like 256x256 JPEGs in 4 classes
(tests/support/helpers.py write_camera_jpegs, halves=True, seed 0) as 4 TFRecord shards by `pipeline prepare`,
and a fixed held-out shard of 256 more (seed 1) that neither command trains on.

Per run length, PAIRS pairs, the two commands alternated (which goes first swaps every pair), each
timed as a whole process: wall clock, CPU (user + system of the process and its children, from
wait4), peak RSS. Per pair: pipeline / recipe. Medians over the pairs. Held-out accuracy: the
pipeline's own (its seeded 20% split, from the manifest) and both models' on the fixed held-out
shard (evaluated after the timed runs, each by its own decoding). Targets (issue 30): pipeline /
recipe wall <= 0.9 at 10 epochs, <= 1.0 at 3 epochs.

Results: a section of bench/results/train.md (rewritten after every run, so an interrupted bench
keeps the pairs it finished), raw numbers in bench/results/train_process.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
MARK = "<!-- bench/training/train_process.py: everything below is rewritten by it -->"
CLASSES = 4


def make_data(root: Path) -> dict:
    """The 4 training shards and the held-out shard under `root` (reused when already there)."""
    shards, heldout = root / "shards", root / "heldout"
    if not (shards / "labels.txt").exists() or not (heldout / "labels.txt").exists():
        sys.path.insert(0, str(REPO))
        from pipeline import prepare
        from tests.support.helpers import write_camera_jpegs

        for folder, per_class, seed, count in ((shards, 256, 0, 4), (heldout, 64, 1, 1)):
            shutil.rmtree(folder, ignore_errors=True)
            photos = write_camera_jpegs(root / f"photos-{folder.name}", per_class=per_class, size=(256, 256), seed=seed, halves=True)
            total = sum(p.stat().st_size for p in photos.rglob("*.jpg"))
            prepare.write_shards(prepare.PrepareConfig(shard_mb=total / (count - 0.5) / 1e6), str(photos), str(folder))
            shutil.rmtree(photos)
    return {"train": str(shards / "*.tfrec"), "heldout": str(heldout / "*.tfrec"),
            "shards": len(list(shards.glob("*.tfrec")))}


def commands(data: dict, epochs: int, out: Path) -> dict:
    python = sys.executable
    return {
        "pipeline": [python, "-m", "pipeline", "train", "--data", data["train"], "--model", "mobilenet_v2", "--alpha", "0.35",
                     "--image-size", "96", "--epochs", str(epochs), "--batch-size", "32", "--out", str(out / "pipeline")],
        "recipe": [python, str(REPO / "bench" / "training" / "recipe_train.py"), "--data", data["train"], "--heldout", data["heldout"],
                   "--classes", str(CLASSES), "--epochs", str(epochs), "--batch-size", "32", "--out", str(out / "recipe")],
    }


def timed(argv: list) -> dict:
    """Run `argv` to its end: wall seconds, CPU seconds and peak RSS (MiB) of the process, from wait4."""
    load = os.getloadavg()[0]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
    env.pop("TF_CONFIG", None)
    env.pop("TPU_NAME", None)
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed ({child.returncode}):\n{stderr[-3000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024,
            "load_before": load, "load_after": os.getloadavg()[0], "stdout": stdout[-4000:]}


def pipeline_facts(run: Path) -> dict:
    manifest = json.loads((run / "manifest.json").read_text())
    history = json.loads((run / "history.json").read_text())
    training = manifest["training"]
    return {"heldout_accuracy": manifest["metrics"]["heldout"]["accuracy"],
            "heldout_examples": manifest["data"]["split"]["heldout_examples"],
            "train_examples": manifest["data"]["split"]["train_examples"],
            "batchnorm": {k: training["batchnorm"].get(k) for k in ("estimates", "examples", "seconds", "when")},
            "steps_per_execution": training["steps_per_execution"],
            "epoch_seconds": [e["seconds"] for e in history],
            "val_accuracy": [round(e.get("val_accuracy", float("nan")), 4) for e in history]}


def evaluate_saved(run: str, heldout: str) -> dict:
    """In a fresh process: accuracy of a pipeline run's saved model on the fixed held-out shard, decoded
    as the pipeline decodes (the run's own preprocessing)."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    sys.path.insert(0, str(REPO))
    import numpy as np
    import tf_keras as keras

    from pipeline import data as data_mod

    manifest = json.loads((Path(run) / "manifest.json").read_text())
    model = keras.models.load_model(str(Path(run) / "keras_model.keras"))
    source = data_mod.open_source(heldout, manifest["labels"])
    images, labels = data_mod.to_numpy(source.dataset(manifest["model"]["image_size"]))
    top1 = model.predict(images.astype(np.float32), verbose=0).argmax(1)
    return {"accuracy": float((top1 == labels).mean()), "images": int(len(labels))}


def run_pairs(data: dict, epochs_list, pairs: int, work: Path, results: dict) -> None:
    for epochs in epochs_list:
        entry = results["runs"].setdefault(str(epochs), {"pairs": []})
        for i in range(len(entry["pairs"]), pairs):
            order = ("pipeline", "recipe") if i % 2 == 0 else ("recipe", "pipeline")
            out = work / f"e{epochs}-p{i}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            argv = commands(data, epochs, out)
            pair = {"order": list(order)}
            for name in order:
                pair[name] = timed(argv[name])
                print(f"{epochs} epochs, pair {i + 1}, {name}: {pair[name]['wall']:.1f} s wall, {pair[name]['cpu']:.1f} s cpu, "
                      f"load {pair[name]['load_before']:.1f}-{pair[name]['load_after']:.1f}", flush=True)
            pair["pipeline"].update(pipeline_facts(out / "pipeline"))
            pair["recipe"].update(json.loads(pair["recipe"]["stdout"].strip().splitlines()[-1]))
            fixed = subprocess.run([sys.executable, __file__, "--evaluate", str(out / "pipeline"), data["heldout"]], cwd=REPO,
                                   capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
            if fixed.returncode != 0:
                raise SystemExit(f"evaluating {out / 'pipeline'} failed:\n{fixed.stderr[-3000:]}")
            pair["pipeline"]["fixed_heldout_accuracy"] = json.loads(fixed.stdout.strip().splitlines()[-1])["accuracy"]
            for name in ("pipeline", "recipe"):
                pair[name].pop("stdout", None)
            entry["pairs"].append(pair)
            shutil.rmtree(out, ignore_errors=True)
            write(results)


def _median(values):
    return statistics.median(values) if values else float("nan")


def write(results: dict) -> None:
    (RESULTS / "train_process.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [MARK, "", "## Whole processes: `pipeline train` against the recipe by hand", "",
             "Command: `.venv/bin/python bench/training/train_process.py " + results["argv"] + "`  ",
             f"Date: {results['date']}; machine: {results['cpu']}, {os.cpu_count()} CPUs shared with other jobs "
             f"(load average of the 1 minute before each run in the table); Python {results['python']}", "",
             f"Data: 1,024 camera-like 256x256 JPEGs, 4 classes, in {results['data']['shards']} TFRecord shards "
             "(`pipeline prepare`); a fixed held-out shard of 256 more JPEGs (another seed) that neither command trains on.", "",
             "- pipeline: `python -m pipeline train --data 'DIR/*.tfrec' --model mobilenet_v2 --alpha 0.35 --image-size 96 "
             "--epochs N --batch-size 32 --out RUN` (trains on its seeded 80%, validates every epoch on the other 20%)",
             "- recipe: `python bench/training/recipe_train.py --data 'DIR/*.tfrec' --heldout 'HELDOUT/*.tfrec' --classes 4 --epochs N "
             "--batch-size 32 --out RUN` (trains on all 1,024, no validation while training, one evaluation at the end)", "",
             "Wall and CPU seconds and peak RSS of each whole process (wait4); the two alternate, the first of a pair "
             "swapping every pair. Held-out accuracy: `own` = the pipeline's 20% split (manifest); `fixed` = the fixed "
             "held-out shard (256 images), each model with its own decoding.", ""]
    for epochs, entry in results["runs"].items():
        pairs = entry["pairs"]
        if not pairs:
            continue
        lines += [f"### {epochs} epochs", "",
                  "| pair | first | pipeline wall s | recipe wall s | wall ratio | pipeline cpu s | recipe cpu s | cpu ratio | "
                  "pipeline peak MiB | recipe peak MiB | load | pipeline held-out own / fixed | recipe held-out fixed | "
                  "pipeline BatchNorm s | pipeline epoch s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for i, p in enumerate(pairs, 1):
            a, b = p["pipeline"], p["recipe"]
            lines.append(
                f"| {i} | {p['order'][0]} | {a['wall']:.1f} | {b['wall']:.1f} | **{a['wall'] / b['wall']:.2f}** | {a['cpu']:.1f} | "
                f"{b['cpu']:.1f} | {a['cpu'] / b['cpu']:.2f} | {a['peak_mib']:.0f} | {b['peak_mib']:.0f} | "
                f"{a['load_before']:.1f} / {b['load_before']:.1f} | {a['heldout_accuracy']:.4f} / {a['fixed_heldout_accuracy']:.4f} | "
                f"{b['heldout_accuracy']:.4f} | {a['batchnorm'].get('seconds')} | {', '.join(f'{s:.1f}' for s in a['epoch_seconds'])} |")
        med = {k: {n: _median([p[n][k] for p in pairs]) for n in ("pipeline", "recipe")} for k in ("wall", "cpu", "peak_mib")}
        ratios = [p["pipeline"]["wall"] / p["recipe"]["wall"] for p in pairs]
        target = 0.9 if epochs == "10" else 1.0
        verdict = "pass" if _median(ratios) <= target else "FAIL"
        lines += ["", f"Medians of {len(pairs)} pairs: pipeline {med['wall']['pipeline']:.1f} s wall, {med['cpu']['pipeline']:.1f} s cpu, "
                  f"{med['peak_mib']['pipeline']:.0f} MiB; recipe {med['wall']['recipe']:.1f} s wall, {med['cpu']['recipe']:.1f} s cpu, "
                  f"{med['peak_mib']['recipe']:.0f} MiB. Median of the per-pair wall ratios: **{_median(ratios):.2f}** "
                  f"(range {min(ratios):.2f}-{max(ratios):.2f}; target <= {target}): {verdict}. Median cpu ratio "
                  f"{_median([p['pipeline']['cpu'] / p['recipe']['cpu'] for p in pairs]):.2f}.", ""]
    text = (RESULTS / "train.md").read_text() if (RESULTS / "train.md").exists() else "# Training benchmarks\n"
    head = text.split(MARK)[0].rstrip() + "\n\n"
    (RESULTS / "train.md").write_text(head + "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--epochs", type=int, nargs="+", default=[10, 3])
    parser.add_argument("--data-dir", help="keep the data here (made when absent) instead of a temporary folder")
    parser.add_argument("--resume", action="store_true", help="keep the pairs already in train_process.json")
    args = parser.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), "unknown CPU")
    results = json.loads((RESULTS / "train_process.json").read_text()) if args.resume else {}
    argv = " ".join(sys.argv[1:])
    results.update({"argv": argv if not args.resume else results.get("argv", argv),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu,
                    "python": sys.version.split()[0]})
    results.setdefault("runs", {})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.data_dir) if args.data_dir else Path(tmp) / "data"
        root.mkdir(parents=True, exist_ok=True)
        results["data"] = make_data(root)
        results["runs"] = {str(e): results["runs"].get(str(e), {"pairs": []}) for e in args.epochs}
        run_pairs(results["data"], args.epochs, args.pairs, Path(tmp) / "runs", results)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--evaluate":
        print(json.dumps(evaluate_saved(sys.argv[2], sys.argv[3])))
    else:
        main()
