"""Every rung of the remedy ladder that applies to a detector, each on its own, on one trained detection run:
tuning split and held-out side by side.

    .venv/bin/python bench/remedy/detect_rungs.py RUN [--calibration-data FILE.npy] [--calibration-samples N]

For the export as asked (the options) and for each rung's export config (pipeline/remedy/ladder.py's LADDER; the
rungs a detector skips are printed with why), converted in memory by the detection export's own `convert`: mAP@.5
and agreement on the tuning split scored as the ladder scores it (pipeline/tasks/detect/tuning.py), and on the
held-out images parity reports on, scored by the same functions (read here only to show how well the tuning split
predicts them; the ladder never sees them). Also "bias-asked": bias correction on the user's own calibration set.
Prints a markdown table; nothing in RUN changes.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("--calibration-data", type=Path, default=None)
    parser.add_argument("--calibration-samples", type=int, default=None)
    args = parser.parse_args()

    import numpy as np

    from pipeline import export, tasks
    from pipeline.remedy import ladder as remedy, tuning_split
    from pipeline.rundir.run import Run
    from pipeline.tasks.detect.data.heldout import recorded_heldout
    from pipeline.tasks.detect import export as detect_export

    run = Run.open(args.run)
    task = tasks.of_run(run).tuning()
    config = export.ExportConfig(mode=export.Mode.INT8, calibration_data=args.calibration_data,
                                 calibration_samples=args.calibration_samples)
    start = time.monotonic()
    tuning = task.split(run, config.seed)
    heldout = recorded_heldout(run)
    size = (run.image_size, run.image_size)
    held = tuning_split.TuningSplit(np.arange(len(heldout)), [e.id for e in heldout],
                              np.stack([run.contract.load_pixels(e.image, size, name=e.id) for e in heldout]), heldout, 0, 0, 1)
    sets = {"tuning": tuning, "held-out": held}
    reference = {name: task.reference(run, s) for name, s in sets.items()}
    floats = {name: task.scores(reference[name], reference[name], s, run.labels) for name, s in sets.items()}
    print(f"run {args.run}, as asked: calibration_data={args.calibration_data} calibration_samples={args.calibration_samples}; "
          f"tuning split {len(tuning.ids)} images, held-out {len(heldout)}; reference scored in {time.monotonic() - start:.1f} s")
    print("float mAP@.5: " + ", ".join(f"{n} {floats[n]['map50'].shown:.4f}" for n in sets))

    rows = [("none", config)]
    for rung in remedy.LADDER:
        why = task.not_applicable.get(rung.name)
        candidate = remedy.Skip(why) if why else rung.config(config, tuning)
        if isinstance(candidate, remedy.Skip):
            print(f"{rung.name}: skipped, {candidate.why}")
            continue
        rows.append((rung.name, candidate))
    if args.calibration_data is not None or args.calibration_samples is not None:
        rows.append(("bias-asked", dataclasses.replace(config, float_edits=("bias",))))

    header = ["remedy", "seconds"] + [f"{n} mAP@.5 (drop pp)" for n in sets] + [f"{n} agreement" for n in sets]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, candidate in rows:
        start = time.monotonic()
        try:
            model = detect_export.convert(dataclasses.replace(candidate, remedy=None if name == "none" else name), run)
        except Exception as err:  # a rung that cannot make a model is a row too
            print(f"| {name} | could not make a model: {str(err).splitlines()[0][:160]} |")
            continue
        seconds = time.monotonic() - start
        scored = {n: task.scores(task.candidate(model.bytes, s, model.contract), reference[n], s, run.labels) for n, s in sets.items()}
        maps = [f"{scored[n]['map50'].shown:.4f} ({(floats[n]['map50'].shown - scored[n]['map50'].shown) * 100:.2f})" for n in sets]
        agree = [scored[n]["agreement"].describe() for n in sets]
        print(f"| {name} | {seconds:.1f} | " + " | ".join(maps + agree) + " |", flush=True)


if __name__ == "__main__":
    main()
