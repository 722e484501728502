"""A held-out set the user gives `pipeline parity RUN --data SPEC` of a detection run: in every form `pipeline train
--data` takes, read with its own class names (a TFRecord set's labels.txt, not the run's), refused unless they are
the run's in its order, and refused when it holds no image or an image the run trained on."""
from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

from pipeline.errors import DataError  # noqa: E402
from pipeline.tasks.detect.data.coco import write_coco  # noqa: E402
from pipeline.tasks.detect.data.heldout import given_heldout  # noqa: E402
from pipeline.tasks.detect.data.specs import open_detection  # noqa: E402
from pipeline.tasks.detect.data.tfrecords import write_tfrecords  # noqa: E402
from pipeline.tasks.detect.data.yolo import write_yolo  # noqa: E402
from tests.pipeline.tasks.detect.data.test_seen import SPEC, fake_run  # noqa: E402

pytestmark = pytest.mark.host

OTHER = "shapes?count=6&size=32&seed=9"


def _as_files(spec: str):
    """The images of `spec` under file names (shapes' ids have no suffix; a YOLO folder's images need one)."""
    source = open_detection(spec)
    return source._replace(examples=[e._replace(id=e.id.replace("/", "-") + ".png") for e in source.examples])


def _written(form: str, source, folder) -> str:
    """`source` as a user would hand it over in `form`; its spec."""
    if form == "coco":
        write_coco(source, folder / "annotations.json")
        return str(folder / "annotations.json")
    if form == "yolo":
        return str(write_yolo(source, folder))
    write_tfrecords(source, str(folder))
    return str(folder / "*.tfrecord")


@pytest.mark.parametrize("form", ["coco", "yolo", "tfrecord"])
def test_each_form_train_takes_is_read_with_its_own_classes(tmp_path, form):
    run = fake_run(tmp_path)
    source = _as_files(OTHER)
    spec = _written(form, source, tmp_path / form)
    given = given_heldout(run, spec)
    assert [e.digest for e in given.examples] == [e.digest for e in source.examples]
    assert given.record["source"] == spec and given.record["kind"] == form and given.record["trained_on_checked"]
    # The same images with the classes renamed, or in another order, are other classes: refused, naming which.
    for labels, named in ((["square", "circle", "triangle", "star"], "missing 'cross'; not the run's: 'star'"),
                          (["circle", "square", "triangle", "cross"], "class 0 is 'circle', the run's class 0 is 'square'")):
        spec = _written(form, source._replace(labels=labels), tmp_path / f"{form}-{labels[0]}-{labels[3]}")
        with pytest.raises(DataError, match=f"expected the run's classes .* in that order .*{named}"):
            given_heldout(run, spec)


def test_the_training_set_itself_is_refused_naming_another_seed(tmp_path):
    with pytest.raises(DataError, match=r"images are ones this run trained on, by content .*: another seed, as in "
                                        r"shapes\?seed=1$"):
        given_heldout(fake_run(tmp_path), SPEC)


def test_a_set_of_no_image_is_refused(tmp_path):
    spec = _written("coco", _as_files(OTHER)._replace(examples=[]), tmp_path)
    with pytest.raises(DataError, match="holds no images; expected held-out images to compare the models on"):
        given_heldout(fake_run(tmp_path), spec)
