"""A pose run's held-out images and its training split, read again from the data it recorded: the held-out ones checked
against the identities training recorded (for parity and the report), the training ones in the split's order (what the
int8 export calibrates on)."""
from __future__ import annotations


def run_layout(run):
    """The keypoint layout the run recorded (the manifest's pose.keypoints)."""
    from pipeline.tasks.pose.data.examples import KeypointLayout

    return KeypointLayout.from_dict(run.fact("pose", "keypoints"))


def recorded_heldout(run) -> list:
    """The recorded held-out images, checked against the identities training recorded."""
    from pipeline.tasks.detect.data.heldout import checked_recorded
    from pipeline.tasks.pose.data.specs import open_pose

    return checked_recorded(run, "pose", open_pose,
                            lambda: open_pose(run.data.val_spec, run.labels, run.data.images, run_layout(run)).examples)


def training_examples(run) -> list:
    """The training split's examples in the split's order."""
    from pipeline.tasks.detect.data.recorded import recorded_share
    from pipeline.tasks.pose.data.specs import open_pose

    return recorded_share(run, open_pose, "all" if run.data.val_spec else "train")


def given_heldout(run, spec: str):
    """(examples, report.json's "heldout") of `spec`, a held-out set the user gives parity in any form `pipeline train
    --task pose --data` takes: refused unless it holds the run's classes in its order and its keypoint layout, at least
    one image, and no image the run trained or tuned on (by content: pipeline/data/seen.py)."""
    from pipeline.tasks.detect.data.heldout import checked_given
    from pipeline.tasks.pose.data.specs import FIGURES, open_pose

    return checked_given(run, spec, open_pose(spec, layout=run_layout(run)), FIGURES, training_examples)
