"""A detection run's held-out images, and the tuning images an import set aside from its --val-data: the ones its
manifest records by identity, read again and checked, for parity, the device bundle and the remedy ladder; or a
held-out set the user gives (`pipeline parity RUN --data SPEC`, and with --bundle), checked to hold the run's classes
in its order and no image it trained or tuned on."""
from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional

from pipeline.errors import DataError, ManifestError

RECORDED = "the run's recorded held-out split"


class Given(NamedTuple):
    examples: List  # DetExample, in the set's order
    record: dict  # report.json's "heldout": which set, its size, and what was checked


def given_heldout(run, spec: str) -> Given:
    """The images of `spec` (any form `pipeline train --data` takes: its own class names, a COCO JSON's file names
    relative to its folder), refused unless they hold the run's classes in its order, at least one image, and no image
    the run trained or tuned on (by content: pipeline/data/seen.py)."""
    from pipeline.tasks.detect.data.specs import SHAPES, open_detection

    return checked_given(run, spec, open_detection(spec), SHAPES)


def checked_given(run, spec: str, source, builtin: str, read_training: Optional[Callable] = None) -> Given:
    """`source`, the data of `spec`, checked as a held-out set for `run` (detect's, or a task's built on it): the run's
    classes in its order, at least one image, none the run trained or tuned on, its training images read again by
    `read_training(run)` when the run recorded no digests (detection's reader when not given). `builtin` names the
    task's built-in set, whose other seed draws other images."""
    from pipeline.data.seen import check_unseen
    from pipeline.tasks.detect.data.seen import training_again
    from pipeline.tasks.detect.data.specs import check_classes

    check_classes(spec, source.labels, run.labels, "the run's")
    if not source.examples:
        raise DataError(f"--data {spec} holds no images; expected held-out images to compare the models on")
    # The built-in set is drawn from its seed: another seed draws other images.
    instead = f"another seed, as in {builtin}?seed=1" if source.kind == builtin else "leave them out"
    checked = check_unseen(run, source.examples, spec, lambda: training_again(run, read_training), instead)
    return Given(source.examples, {"source": spec, "kind": source.kind, "resolved": source.spec, **checked})


def recorded_heldout(run) -> list:
    """The recorded held-out images, checked against the identities training recorded."""
    from pipeline.tasks.detect.data.specs import open_detection

    return checked_recorded(run, "detect", open_detection, lambda: _val_share(run, "heldout"))


def checked_recorded(run, task: str, open_data: Callable, read_val: Callable[[], list]) -> list:
    """The held-out images `run` (of `task`: detect, or one built on it) recorded, read again and checked against the
    identities training recorded: `read_val()` when it held out --val-data, else the recorded share of its --data
    opened by `open_data`."""
    recorded = ((run.data.identity or {}).get("heldout") or {}).get("examples")
    if recorded is None:
        raise ManifestError(f"{run.dir}'s manifest records no held-out images (data.identity.heldout.examples); "
                            f"expected the manifest written by `pipeline train --task {task}`")
    from pipeline.tasks.detect.data.recorded import recorded_share

    examples = read_val() if run.data.val_spec else recorded_share(run, open_data, "heldout")
    _check(examples, recorded, "held-out")
    return examples


def recorded_tuning(run) -> list:
    """The tuning images `pipeline import` set aside from --val-data, checked against the identities it recorded;
    empty for a run that set none aside (trained, or imported without --val-data or before edgeflow did)."""
    from pipeline.data.identity import tunes_on_val

    recorded = ((run.data.identity or {}).get("tuning") or {}).get("examples")
    if not recorded or not tunes_on_val(run):
        return []
    examples = _val_share(run, "tuning")
    _check(examples, recorded, "tuning")
    return examples


def _val_share(run, split: str) -> list:
    """The --val-data images of `split` ('heldout' or 'tuning'): all of them held out, unless an import set a tuning
    share aside (`recorded_tuning` asks only then)."""
    from pipeline.data.examples import val_indices
    from pipeline.data.identity import recorded_split, tunes_on_val
    from pipeline.tasks.detect.data.specs import open_detection

    examples = open_detection(run.data.val_spec, run.labels, run.data.images).examples
    if not tunes_on_val(run):
        return examples
    return [examples[i] for i in val_indices(examples, split, recorded_split(run))]


def _check(examples: list, recorded: list, name: str) -> None:
    got = [[e.id, e.digest] for e in examples]
    if got != recorded:
        changed = next((r[0] for r, g in zip(recorded, got) if r != g), None) or f"{len(got)} images, {len(recorded)} recorded"
        raise DataError(f"the {name} images are not the ones training recorded ({changed}); expected the same data")
