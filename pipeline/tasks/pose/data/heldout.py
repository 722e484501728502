"""A pose run's held-out images and its training split, read again from the data it recorded: the held-out ones checked
against the identities training recorded (for parity and the report), the training ones in the split's order (what the
int8 export calibrates on)."""
from __future__ import annotations

from pipeline.errors import ManifestError


def run_layout(run):
    """The keypoint layout the run recorded (the manifest's pose.keypoints)."""
    from pipeline.tasks.pose.data.examples import KeypointLayout

    entry = (run.manifest.get("pose") or {}).get("keypoints")
    if entry is None:
        raise ManifestError(f"{run.dir}'s manifest records no pose.keypoints; expected the manifest written by "
                            "`pipeline train --task pose`")
    return KeypointLayout.from_dict(entry)


def recorded_heldout(run) -> list:
    """The recorded held-out images, checked against the identities training recorded."""
    from pipeline.data.identity import recorded_split
    from pipeline.tasks.detect.data.heldout import _check
    from pipeline.tasks.pose.data.specs import open_pose

    recorded = ((run.data.identity or {}).get("heldout") or {}).get("examples")
    if recorded is None:
        raise ManifestError(f"{run.dir}'s manifest records no held-out images (data.identity.heldout.examples); "
                            "expected the manifest written by `pipeline train --task pose`")
    if run.data.val_spec:
        examples = open_pose(run.data.val_spec, run.labels, run.data.images, run_layout(run)).examples
    else:
        source = open_pose(run.data.train_spec, images=run.data.images)
        examples = [source.examples[i] for i in source.indices("heldout", recorded_split(run))]
    _check(examples, recorded, "held-out")
    return examples


def training_examples(run) -> list:
    """The training split's examples in the split's order."""
    from pipeline.data.identity import recorded_split
    from pipeline.tasks.pose.data.specs import open_pose

    source = open_pose(run.data.train_spec, images=run.data.images)
    return [source.examples[i] for i in source.indices("all" if run.data.val_spec else "train", recorded_split(run))]
