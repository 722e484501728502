"""Every rung of the remedy ladder, each on its own, on one trained run: tuning split and held-out side by side.

    .venv/bin/python bench/remedy/rungs.py RUN [--per-tensor] [--calibration-samples 8] [--views 4 16]
    .venv/bin/python bench/remedy/rungs.py RUN --views 1 --rungs distil-5 --qat DISTIL_LOSS=logits DISTIL_LEARNING_RATE=1e-5

For the export as asked (OPTIONS) and for each rung's export config (pipeline/remedy/ladder.py's LADDER, plus the
float edits alone and together), converted in memory by the export stage's own `convert`: agreement and top-1
on the tuning split scored as the ladder scores it (seeded views of a quarter of the training images), with more
views too, and on the held-out images parity reports on (read here only to show how well the tuning split
predicts them; the ladder never sees them). A run that set its tuning split aside before training scores it once
(views apply only to older runs). Each set's noise is pipeline/remedy/near_ties.py's: the margin shift int8 makes on
95% of its images, with the float answers under it in brackets (the near ties, about half of which it flips).
`--rungs distil-N` / `qat-N` also makes rows with N epochs that the ladder lacks; `--qat NAME=VALUE` sets a
constant of pipeline/quant/qat.py (the learning rate, the distillation loss) for every row. Also the float edits'
own effect on the float model (largest score change against the unedited float model). Prints a markdown table;
nothing in RUN changes.
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
    parser.add_argument("--per-tensor", action="store_true")
    parser.add_argument("--calibration-samples", type=int, default=None)
    parser.add_argument("--views", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--rungs", nargs="*", default=None, help="only these rows (names as printed)")
    parser.add_argument("--qat", nargs="*", default=[], help="NAME=VALUE: a constant of pipeline/quant/qat.py")
    args = parser.parse_args()

    import numpy as np

    from pipeline import export
    from pipeline.data.heldout import heldout_examples
    from pipeline.quant.calibration import calibration_images
    from pipeline.tasks.classify.export import convert
    from pipeline.tasks.classify.parity import _heldout_pixels
    from pipeline.remedy import ladder, tuning_split
    from pipeline.remedy.near_ties import near_ties
    from pipeline.remedy.rungs import Skip
    from pipeline.remedy.rungs.fine_tuning import fine_tuning
    from pipeline.tasks.classify import tuning as classify_tuning
    from pipeline.rundir.run import Run

    from pipeline.quant import qat

    for item in args.qat:
        name, _, value = item.partition("=")
        current = getattr(qat, name)  # an unknown name fails here
        setattr(qat, name, type(current)(value))
    run = Run.open(args.run)
    config = export.ExportConfig(mode=export.Mode.INT8, per_tensor=args.per_tensor,
                                 calibration_samples=args.calibration_samples)
    splits = {}
    for views in args.views:
        tuning_split.TUNING_VIEWS = tuning_split.SET_ASIDE_VIEWS = views  # the constants, set for this measurement only
        splits[f"tuning x{views}"] = tuning_split.tuning_split(run, config.seed)
    tuning = next(iter(splits.values()))
    heldout_images, heldout_labels = _heldout_pixels(run, heldout_examples(run, None))
    sets = {name: (s.images, s.truth) for name, s in splits.items()}
    sets["held-out"] = (heldout_images, heldout_labels)
    reference = {name: classify_tuning.reference(run, tuning._replace(images=images)) for name, (images, _) in sets.items()}

    rows = [("none", config)]
    for rung in ladder.LADDER:
        candidate = rung.config(config, tuning)
        if not isinstance(candidate, Skip):
            rows.append((rung.name, candidate))
    rows.append(("equalize-8", dataclasses.replace(config, float_edits=("equalize",))))  # on the user's calibration set
    rows.append(("bias-8", dataclasses.replace(config, float_edits=("bias",))))
    for name in args.rungs or ():
        kind, _, epochs = name.partition("-")
        if kind in ("distil", "qat") and epochs.isdigit() and name not in dict(rows):
            rows.append((name, fine_tuning(int(epochs), distil=kind == "distil")(config, tuning)))
    if args.rungs:
        rows = [r for r in rows if r[0] in args.rungs]

    header = (["remedy", "seconds"] + [f"{n} agree" for n in sets] + [f"{n} top-1" for n in sets]
              + [f"{n} noise (near ties)" for n in sets])
    print(f"run {args.run}, options per_tensor={args.per_tensor} calibration_samples={args.calibration_samples} "
          f"qat {' '.join(args.qat) or 'as built'}; load {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"float top-1: " + ", ".join(f"{n} {(reference[n].argmax(1) == sets[n][1]).mean():.4f} ({len(sets[n][1])})" for n in sets))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, candidate in rows:
        start = time.monotonic()
        try:
            model = convert(dataclasses.replace(candidate, remedy=None if name == "none" else name), run)
        except Exception as err:  # a rung that cannot make a model is a row too
            print(f"| {name} | could not make a model: {str(err).splitlines()[0][:160]} |")
            continue
        seconds = time.monotonic() - start
        agree, top1, noise = [], [], []
        for n, (images, labels) in sets.items():
            out = classify_tuning.candidate(model.bytes, tuning._replace(images=images), model.contract)
            agree.append(f"{(out.argmax(1) == reference[n].argmax(1)).mean():.4f} ({(out.argmax(1) != reference[n].argmax(1)).sum()} off)")
            top1.append(f"{(out.argmax(1) == labels).mean():.4f}")
            ties = near_ties(reference[n], out)  # the int8 noise, which predicts agreement through the near ties
            noise.append(f"{ties['noise']:.3f} ({ties['near_ties']})")
        print(f"| {name} | {seconds:.1f} | " + " | ".join(agree + top1 + noise) + " |", flush=True)

    if not args.rungs or "float-check" in args.rungs:
        import tf_keras as keras

        from pipeline.remedy import float_edits

        original = keras.models.load_model(str(run.artifact("keras_model")), compile=False)
        for name, candidate in rows:
            if not candidate.float_edits:
                continue
            calibration = calibration_images(run, candidate, run.image_size)[0]
            edits = candidate.float_edits
            edited = float_edits.apply(original, edits, calibration, args.per_tensor)
            for n, (images, _) in sets.items():
                a = original.predict(images.astype(np.float32), verbose=0)
                b = edited.predict(images.astype(np.float32), verbose=0)
                print(f"float edit {'+'.join(edits)} ({len(calibration)} calibration images) on {n}: largest score change {np.abs(a - b).max():.2e}, "
                      f"top-1 changed on {(a.argmax(1) != b.argmax(1)).sum()} of {len(a)}")


if __name__ == "__main__":
    main()
