"""The float model's near ties on the held-out images, and what they cost the run's int8 model.

    .venv/bin/python bench/remedy/near_ties.py RUN [RUN ...]        (each RUN exported with --int8)

pipeline/remedy/near_ties.py's `near_ties` (the numbers the export's `why:` line gives on the tuning split) on the
held-out images parity scores: the SavedModel's scores against model_int8.tflite's, with the disagreements and the
float margins of the answers that flipped. Prints one line per run; nothing in RUN changes.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    import numpy as np

    from pipeline.data.heldout import heldout_examples
    from pipeline.remedy import tuning_split
    from pipeline.remedy.near_ties import near_ties
    from pipeline.quant.convention import contract as model_contract
    from pipeline.rundir.run import Run
    from pipeline.tasks.classify import tuning as classify_tuning
    from pipeline.tasks.classify.parity import _heldout_pixels

    for path in sys.argv[1:]:
        run = Run.open(path)
        images, labels = _heldout_pixels(run, heldout_examples(run, None))
        heldout = tuning_split.TuningSplit(np.zeros(0, np.int64), [], images, labels, 0, 0)
        reference = classify_tuning.reference(run, heldout)
        outputs = classify_tuning.candidate(run.artifact("model_int8").read_bytes(), heldout,
                                            model_contract(run.contract, int8=True))
        off = reference.argmax(1) != outputs.argmax(1)
        ranked = np.sort(reference, 1)
        margins = ranked[:, -1] - ranked[:, -2]
        print(f"{path}: {near_ties(reference, outputs)}; {int(off.sum())} of {len(off)} off, float margins "
              f"{[round(float(m), 2) for m in np.sort(margins[off])]}; float top-1 {(reference.argmax(1) == labels).mean():.4f}",
              flush=True)


if __name__ == "__main__":
    main()
