"""A pose run's held-out images and its training split, read again from the data it recorded: the held-out ones checked
against the identities training recorded (for parity and the report), the training ones in the split's order (what the
int8 export calibrates on)."""
from __future__ import annotations

from pipeline.errors import DataError, ManifestError


def run_layout(run):
    """The keypoint layout the run recorded (the manifest's pose.keypoints)."""
    from pipeline.tasks.pose.data.examples import KeypointLayout

    return KeypointLayout.from_dict(run.fact("pose", "keypoints"))


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


def given_heldout(run, spec: str):
    """(examples, report.json's "heldout") of `spec`, a held-out set the user gives parity in any form `pipeline train
    --task pose --data` takes: refused unless it holds the run's classes in its order and its keypoint layout, at least
    one image, and no image the run trained or tuned on (by content: pipeline/data/seen.py)."""
    from pipeline.data.seen import check_unseen
    from pipeline.tasks.detect.data.seen import training_again
    from pipeline.tasks.detect.data.specs import check_classes
    from pipeline.tasks.pose.data.specs import FIGURES, open_pose

    source = open_pose(spec, layout=run_layout(run))
    check_classes(spec, source.labels, run.labels, "the run's")
    if not source.examples:
        raise DataError(f"--data {spec} holds no images; expected held-out images to compare the models on")
    # The built-in set is drawn from its seed: another seed draws other images.
    instead = f"another seed, as in {FIGURES}?seed=1" if source.kind == FIGURES else "leave them out"
    checked = check_unseen(run, source.examples, spec, lambda: training_again(run, training_examples), instead)
    return source.examples, {"source": spec, "kind": source.kind, "resolved": source.spec, **checked}
