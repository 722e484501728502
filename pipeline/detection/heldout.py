"""A detection run's held-out images: the ones its manifest records by identity, read again and checked, for
parity and the device bundle."""
from __future__ import annotations

from pipeline.errors import DataError, ManifestError


def recorded_heldout(run) -> list:
    """The recorded held-out images, checked against the identities training recorded."""
    from pipeline.data.identity import recorded_split
    from pipeline.detection.specs import open_detection

    recorded = ((run.data.identity or {}).get("heldout") or {}).get("examples")
    if recorded is None:
        raise ManifestError(f"{run.dir}'s manifest records no held-out images (data.identity.heldout.examples); "
                            "expected the manifest written by `pipeline train --task detect`")
    images = run.data.images  # the folders training found COCO file names in
    if run.data.val_spec:
        examples = open_detection(run.data.val_spec, run.labels, images).examples
    else:
        source = open_detection(run.data.train_spec, images=images)
        examples = [source.examples[i] for i in source.indices("heldout", recorded_split(run))]
    got = [[e.id, e.digest] for e in examples]
    if got != recorded:
        changed = next((r[0] for r, g in zip(recorded, got) if r != g), None) or f"{len(got)} images, {len(recorded)} recorded"
        raise DataError(f"the held-out images are not the ones training recorded ({changed}); expected the same data")
    return examples
