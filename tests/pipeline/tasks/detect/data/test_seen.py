"""Which images a detection run trained or tuned on, by content: recorded one by one from now on, read again for a run
recorded before (and said plainly when they cannot be), and refused in a held-out set the user gives parity."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

from pipeline.errors import DataError  # noqa: E402
from pipeline.rundir.views import DataView  # noqa: E402
from pipeline.data import seen as seen_by  # noqa: E402
from pipeline.tasks.detect.data.seen import training_again  # noqa: E402
from pipeline.tasks.detect.data.specs import open_detection  # noqa: E402

pytestmark = pytest.mark.host

SPEC = "shapes?count=16&size=32&seed=3"


def fake_run(tmp_path, spec: str = SPEC, digests: bool = True, tuning=(), origin=None):
    """A detection run's manifest as `pipeline train` (or `pipeline import`, with `origin`) records its data: a 25%
    held-out split of `spec`; `digests` False: as recorded before the training digests were."""
    from pipeline.data import Split
    from pipeline.tasks import Plan
    from pipeline.tasks.detect.task import _identity

    source = open_detection(spec)
    split = Split(0.25, 0)
    identity = _identity(Plan(source, None, split, None, 0, None, 0, {}, 0), list(tuning))
    if not digests:
        identity.pop("train_digests")
    record = {"train": {"spec": spec}, "val": None, "images": [],
              "split": {"heldout_fraction": split.heldout_fraction, "seed": split.seed}, "identity": identity}
    return SimpleNamespace(data=DataView("data", str(tmp_path / "manifest.json"), record), labels=list(source.labels),
                           origin=origin, dir=tmp_path)


def seen(run):
    return seen_by.seen(run, lambda: training_again(run))


def check_unseen(run, examples, spec):
    return seen_by.check_unseen(run, examples, spec, lambda: training_again(run))


def _split(spec: str = SPEC):
    from pipeline.data import Split

    source = open_detection(spec)
    held = set(source.indices("heldout", Split(0.25, 0)))
    return ([e for i, e in enumerate(source.examples) if i not in held],
            [e for i, e in enumerate(source.examples) if i in held])


def test_training_records_each_training_images_digest_and_no_held_out_one(tmp_path):
    run = fake_run(tmp_path)
    train, heldout = _split()
    assert run.data.identity["train_digests"] == sorted({e.digest for e in train})
    assert not {e.digest for e in heldout} & set(run.data.identity["train_digests"])
    known = seen(run)
    assert known.trained == {e.digest for e in train} and known.tuned == set()
    assert f"the {len(train)} training images' digests the run recorded" == known.how


def test_a_training_image_under_another_name_is_refused_and_a_held_out_one_is_counted(tmp_path):
    run = fake_run(tmp_path)
    train, heldout = _split()
    other = open_detection("shapes?count=4&size=32&seed=4").examples
    renamed = train[2]._replace(id="camera/0001.png")  # the same bytes under another name: the same image
    with pytest.raises(DataError, match=r"--data H: 1 of its 5 images are ones this run trained on, by content "
                                        r"\(camera/0001.png\); expected held-out images the run never trained"):
        check_unseen(run, [*other, renamed], "H")
    checked = check_unseen(run, [*other, heldout[0]], "H")
    assert checked == {"trained_on_checked": True, "checked_against": seen(run).how, "tuning_images": 0,
                       "recorded_heldout": 1}


def test_an_imports_tuning_images_are_refused_and_the_import_says_what_it_cannot_know(tmp_path):
    other = open_detection("shapes?count=6&size=32&seed=5").examples
    run = fake_run(tmp_path, tuning=other[:2], origin={"format": "onnx"})
    with pytest.raises(DataError, match=r"2 of its 4 images are ones this run tuned on"):
        check_unseen(run, other[:4], "H")
    assert "what the model trained on before is unknown to edgeflow" in seen(run).how
    assert check_unseen(run, other[2:], "H")["tuning_images"] == 2


def test_a_run_recorded_before_the_digests_reads_its_training_data_again(tmp_path):
    train, _ = _split()
    known = seen(fake_run(tmp_path, digests=False))
    assert known.trained == {e.digest for e in train}
    assert known.how.startswith(f"the {len(train)} training images read again from {SPEC} (the run records no digests")


def test_when_its_training_data_changed_or_is_gone_it_says_it_cannot_tell(tmp_path):
    run = fake_run(tmp_path, digests=False)
    run.data.record["identity"]["train"]["sha256"] = "0" * 64  # the data now is not the data summarized
    changed = seen(run)
    assert changed.trained is None and f"its training data {SPEC} changed since" in changed.how
    assert check_unseen(run, open_detection(SPEC).examples, "H")["trained_on_checked"] is False  # nothing to refuse by
    run.data.record["train"]["spec"] = str(tmp_path / "gone" / "data.yaml")
    gone = seen(run)
    assert gone.trained is None and "its training data cannot be read again" in gone.how, gone.how
    assert "images it trained on cannot be told from new ones" in gone.how
