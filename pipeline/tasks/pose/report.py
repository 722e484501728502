"""The report's pose section: held-out OKS mAP, box mAP and each keypoint's pixel error, a few held-out images drawn
with their true keypoints and skeletons (green) and the model's (red), from RUN/heldout_poses.json; after parity, each
model's scores on the same images and the gate's verdict. A run without pose scores has no such section."""
from __future__ import annotations

from pipeline.rundir.run import Run
from pipeline.tasks.detect.report import drawn_samples, task_parity

KEY = "heldout_poses"


def section(run: Run) -> dict:
    metrics = run.metrics
    heldout = run.heldout_metrics
    if "oks_map" not in heldout:
        return {"applies": False, "ran": False, "error": None}
    samples, document = drawn_samples(run, KEY)
    layout = document.get("keypoints") or {}
    evaluation = metrics.get("evaluation") or {}
    error = metrics.get("heldout_pixel_error") or {}
    report = task_parity(run, "pose")
    parity = None if report is None else {"models": report["models"], "gate": report["gate"],
                                          "agreement": report.get("agreement") or {}}
    return {
        "applies": True, "ran": True, "error": None,
        "oks_map": heldout.get("oks_map"), "oks_map50": heldout.get("oks_map50"), "box_map": heldout.get("box_map"),
        "box_map50": heldout.get("box_map50"), "images": heldout.get("images"), "objects": heldout.get("objects"),
        "evaluator": evaluation.get("evaluator"), "sigmas_source": evaluation.get("sigmas_source"),
        "nms": evaluation.get("nms") or {},
        "pixel_error": [{"name": n, "px": error.get(n)} for n in layout.get("names", [])],
        "matched": error.get("matched"), "keypoints": layout, "samples": samples, "parity": parity,
        "glance": [("held-out OKS mAP@.5 after training", heldout.get("oks_map50")),
                   ("held-out OKS mAP@[.5:.95]", heldout.get("oks_map"))],
    }
