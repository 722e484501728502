"""Detection data: the three readers on real files they read back, bad data named, boxes kept right
under augmentation, and COCO's evaluator on known predictions."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("tensorflow")
pytest.importorskip("pycocotools")

from pipeline.tasks.detect.data.augment import crop, dataset, flip_horizontal, letterbox  # noqa: E402
from pipeline.tasks.detect.data.coco import read_coco, write_coco  # noqa: E402
from pipeline.tasks.detect.evaluate import Detections, evaluate  # noqa: E402
from pipeline.tasks.detect.data.examples import DetSource, make_example  # noqa: E402
from pipeline.tasks.detect.data.shapes import CLASSES, shapes  # noqa: E402
from pipeline.tasks.detect.data.tfrecords import read_tfrecords, write_tfrecords  # noqa: E402
from pipeline.tasks.detect.data.yolo import read_yolo, write_yolo  # noqa: E402
from pipeline.errors import DataError  # noqa: E402

pytestmark = pytest.mark.host


def _png(height=40, width=60, box=None) -> bytes:
    pixels = np.zeros((height, width, 3), np.uint8)
    if box is not None:
        y0, x0, y1, x1 = box
        pixels[y0:y1, x0:x1] = 255
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _small_source() -> DetSource:
    """Three images, one with no object, exact in pixels so every format stores them exactly."""
    labels = ["cat", "dog"]
    examples = [
        make_example("images/a.png", _png(40, 60), [(0.25, 0.1, 0.75, 0.5), (0.0, 0.5, 0.5, 1.0)], [0, 1], 2, "a"),
        make_example("images/b.png", _png(50, 50), [(0.2, 0.2, 0.4, 0.6)], [1], 2, "b"),
        make_example("images/c.png", _png(30, 20), [], [], 2, "c"),
    ]
    return DetSource("small", "test", labels, examples)


def _same(a: DetSource, b: DetSource) -> None:
    assert a.labels == b.labels
    assert [e.id for e in a.examples] == [e.id for e in b.examples]
    for x, y in zip(a.examples, b.examples):
        assert (x.digest, x.height, x.width) == (y.digest, y.height, y.width)
        np.testing.assert_allclose(x.boxes, y.boxes, atol=1e-5)
        np.testing.assert_array_equal(x.classes, y.classes)


def test_three_readers_give_the_same_examples(tmp_path):
    source = _small_source()
    write_coco(source, tmp_path / "coco" / "annotations.json")
    yaml_path = write_yolo(source, tmp_path / "yolo")
    write_tfrecords(source, str(tmp_path / "records"), shards=2)
    coco = read_coco(tmp_path / "coco" / "annotations.json")
    yolo = read_yolo(yaml_path)
    records = read_tfrecords(str(tmp_path / "records" / "*.tfrecord"))
    records.examples.sort(key=lambda e: e.id)  # shards interleave the order
    for read in (coco, yolo, records):
        _same(source, read)
    assert len(coco.examples[2].boxes) == 0  # an image with no object is valid


def test_coco_images_dir_and_shapes_round_trip(tmp_path):
    source = shapes(12, size=64, seed=3)
    write_coco(source, tmp_path / "a" / "annotations.json")
    doc = json.loads((tmp_path / "a" / "annotations.json").read_text())
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "annotations.json").write_text(json.dumps(doc))
    read = read_coco(tmp_path / "b" / "annotations.json", images=[str(tmp_path / "a")])
    _same(source, read)


def _split_coco(root, source, val_count):
    """COCO 2017's layout: annotations/ holds one JSON per split, the images are in train/ and val/ beside it."""
    for name, part in (("train", source.examples[val_count:]), ("val", source.examples[:val_count])):
        write_coco(DetSource(name, source.kind, source.labels, part), root / name / "annotations.json")
        (root / "annotations").mkdir(exist_ok=True)
        (root / name / "annotations.json").rename(root / "annotations" / f"instances_{name}.json")
    return root / "annotations" / "instances_train.json", root / "annotations" / "instances_val.json"


def test_coco_2017_layout_finds_each_split_in_its_own_folder(tmp_path):
    source = shapes(10, size=48, seed=4)
    train_json, val_json = _split_coco(tmp_path, source, 3)
    folders = [str(tmp_path / "train"), str(tmp_path / "val")]
    train, val = read_coco(train_json, images=folders), read_coco(val_json, images=folders)
    _same(DetSource("", "", source.labels, source.examples[3:]), train)
    _same(DetSource("", "", source.labels, source.examples[:3]), val)
    with pytest.raises(DataError, match="not found in .*annotations or .*train; expected file_name relative to the JSON's folder"):
        read_coco(val_json, images=folders[:1])


def test_a_file_name_in_two_folders_is_refused_unless_it_is_the_same_file(tmp_path):
    source = shapes(4, size=48, seed=2)
    write_coco(source, tmp_path / "a" / "annotations.json")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "annotations.json").write_text((tmp_path / "a" / "annotations.json").read_text())
    copy = tmp_path / "copy"
    copy.mkdir()
    for e in source.examples:  # an identical copy of every image, and the JSON's own folder: one file each
        (copy / e.id).parent.mkdir(parents=True, exist_ok=True)
        (copy / e.id).write_bytes(e.image)
    _same(source, read_coco(tmp_path / "a" / "annotations.json", images=[str(copy), str(tmp_path / "a")]))
    other = source.examples[1]
    (copy / other.id).write_bytes(source.examples[2].image)  # same name, another picture
    with pytest.raises(DataError) as err:
        read_coco(tmp_path / "b" / "annotations.json", images=[str(tmp_path / "a"), str(copy)])
    assert f"file {other.id!r} is in both {tmp_path / 'a' / other.id} and {copy / other.id}, and they differ" in str(err.value)


@pytest.mark.parametrize("images, specs, message", [
    (["FILE"], ["DIR/annotations.json"], "--images FILE is not a folder; expected a local folder"),
    (["DIR/nowhere"], ["DIR/annotations.json"], "--images DIR/nowhere does not exist; expected a local folder"),
    (["DIR"], ["DIR/data.yaml"], "are relative to, but 'DIR/data.yaml' is not COCO; expected --data or --val-data PATH/annotations.json"),
    (["DIR"], ["shapes", "DIR/data.yaml"], "'shapes' and 'DIR/data.yaml' are not COCO"),
])
def test_images_folders_are_checked_before_anything_is_read(tmp_path, images, specs, message):
    from pipeline.tasks.detect.data.specs import check_images
    from pipeline.errors import ConfigError

    (tmp_path / "FILE").write_text("")
    where = lambda value: value.replace("DIR", str(tmp_path)).replace("FILE", str(tmp_path / "FILE"))  # noqa: E731
    with pytest.raises(ConfigError) as err:
        check_images([where(i) for i in images], [where(s) for s in specs])
    assert where(message) in str(err.value)
    check_images([str(tmp_path)], [where("DIR/data.yaml"), where("DIR/val.json")])  # one COCO spec of two: accepted
    check_images([], ["shapes"])  # no folders, nothing to check


def _coco(tmp_path, doc):
    (tmp_path / "images").mkdir(exist_ok=True)
    (tmp_path / "images" / "a.png").write_bytes(_png(40, 60))
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(doc))
    return path


def _doc(**change):
    doc = {"images": [{"id": 1, "file_name": "images/a.png", "width": 60, "height": 40}],
           "annotations": [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [10, 5, 20, 10]}],
           "categories": [{"id": 1, "name": "cat"}]}
    doc.update(change)
    return doc


@pytest.mark.parametrize("change, message", [
    ({"annotations": [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [50, 5, 20, 10]}]},
     "annotation 7 (image 1): box (0.125, 0.8333, 0.375, 1.167) (ymin, xmin, ymax, xmax as a share of the image) lies outside the image"),
    ({"annotations": [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [10, 5, 0, 10]}]},
     "annotation 7 (image 1): box (0.125, 0.1667, 0.375, 0.1667) has zero or negative size"),
    ({"annotations": [{"id": 7, "image_id": 1, "category_id": 9, "bbox": [10, 5, 20, 10]}]},
     "annotation 7 has unknown category_id 9; expected one of [1]"),
    ({"annotations": [{"id": 7, "image_id": 5, "category_id": 1, "bbox": [10, 5, 20, 10]}]},
     "annotation 7 refers to image 5, which is not in 'images'"),
    ({"images": [{"id": 1, "file_name": "images/a.png", "width": 60, "height": 40}] * 2},
     "image id 1 appears twice"),
    ({"images": [{"id": 1, "file_name": "images/gone.png", "width": 60, "height": 40}]},
     "image 1 file 'images/gone.png' not found"),
])
def test_coco_bad_data_is_named(tmp_path, change, message):
    path = _coco(tmp_path, _doc(**change))
    with pytest.raises(DataError) as err:
        read_coco(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("content, message", [(b"", "the image is empty (0 bytes)"),
                                              (b"not an image at all", "the image cannot be decoded")])
def test_empty_or_unreadable_image_is_named(tmp_path, content, message):
    path = _coco(tmp_path, _doc())
    (tmp_path / "images" / "a.png").write_bytes(content)
    with pytest.raises(DataError) as err:
        read_coco(path)
    assert message in str(err.value) and "a.png" in str(err.value)


def _yolo(tmp_path, line):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(_png(40, 60))
    (tmp_path / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n" + line + "\n")
    (tmp_path / "data.yaml").write_text("names:\n  0: cat\n  1: dog\n")
    return tmp_path / "data.yaml"


@pytest.mark.parametrize("line, message", [
    ("1 0.5 0.5 0.2", "line 2: 4 fields ('1 0.5 0.5 0.2'); expected 5: class cx cy w h"),
    ("2 0.5 0.5 0.2 0.2", "line 2: unknown class 2; expected a class index 0..1"),
    ("1 0.95 0.5 0.2 0.2", "line 2: box (0.4, 0.85, 0.6, 1.05)"),
    ("1 0.5 0.5 0 0.2", "line 2: box (0.4, 0.5, 0.6, 0.5) has zero or negative size"),
])
def test_yolo_bad_lines_are_named(tmp_path, line, message):
    path = _yolo(tmp_path, line)
    with pytest.raises(DataError) as err:
        read_yolo(path)
    assert message in str(err.value)
    assert "a.txt" in str(err.value)


def test_tfrecord_duplicate_ids_and_unknown_labels_are_named(tmp_path):
    source = _small_source()
    twice = DetSource("twice", "test", source.labels, source.examples + source.examples[:1])
    write_tfrecords(twice, str(tmp_path / "dup"))
    with pytest.raises(DataError, match="image id 'images/a.png' appears twice"):
        read_tfrecords(str(tmp_path / "dup" / "*.tfrecord"))
    write_tfrecords(source, str(tmp_path / "few"))
    with pytest.raises(DataError, match=r"object 1: unknown image/object/class/label 2; expected 1\.\.1"):
        read_tfrecords(str(tmp_path / "few" / "*.tfrecord"), labels=["cat"])


def _bright_box(image: np.ndarray):
    """Normalized (ymin, xmin, ymax, xmax) of the pixels brighter than mid-grey."""
    ys, xs = np.nonzero(image.max(axis=-1) > 127)
    h, w = image.shape[:2]
    return np.array([ys.min() / h, xs.min() / w, (ys.max() + 1) / h, (xs.max() + 1) / w])


@pytest.mark.parametrize("transform", ["flip", "letterbox", "crop"])
def test_augmented_boxes_follow_the_pixels(transform):
    import tensorflow as tf

    pixel_box = (10, 30, 25, 52)  # ymin, xmin, ymax, xmax in a 40 x 60 image
    image = tf.io.decode_png(_png(40, 60, pixel_box))
    image = tf.cast(image, tf.float32)
    boxes = tf.constant([[10 / 40, 30 / 60, 25 / 40, 52 / 60]], tf.float32)
    if transform == "flip":
        out, moved = flip_horizontal(image, boxes)
    elif transform == "letterbox":
        out, moved = letterbox(image, boxes, 96)
        assert float(tf.reduce_max(out[64:])) == 0.0  # padded below (the image's 40/60 of 96 = 64 rows)
    else:
        out, moved, mask = crop(image, boxes, tf.constant([True]), tf.constant([0.1, 0.2, 0.9, 0.95]))
        assert bool(mask[0])
    np.testing.assert_allclose(moved.numpy()[0], _bright_box(out.numpy()), atol=1.5 / min(out.shape[:2]))


def test_training_fits_a_share_of_its_images_by_letterbox_with_the_boxes_on_the_object():
    """A 40 x 60 picture with one bright box, drawn 40 times with a letterbox share of one half: both fits come out
    (letterboxed ones are black below the picture's 64 rows of 96, stretched ones grey), and in each the box is where the pixels are."""
    import tensorflow as tf

    from pipeline.tasks.detect.data.augment import fitted

    image = tf.maximum(tf.io.decode_png(_png(40, 60, (10, 30, 25, 52))), 60)  # a dark grey picture: black is padding
    item = {"image": image, "boxes": tf.constant([[10 / 40, 30 / 60, 25 / 40, 52 / 60]], tf.float32),
            "classes": tf.constant([0], tf.int32), "mask": tf.constant([True])}
    ds = fitted(tf.data.Dataset.from_tensors(item).repeat(40), 96, training=True, seed=3, min_crop=1.0, letterbox_share=0.5)
    letterboxed = 0
    for out in ds:
        pixels = out["image"].numpy()
        letterboxed += int(pixels[64:].max() == 0)
        np.testing.assert_allclose(out["boxes"].numpy()[0], _bright_box(pixels), atol=1.5 / 64)
    assert 5 <= letterboxed <= 35


def test_training_pipeline_has_static_shapes_and_keeps_boxes_on_objects():
    source = shapes(8, size=64, seed=1)
    ds = dataset(source.examples, 96, training=True, seed=5, resize="letterbox", max_boxes=8)
    assert ds.element_spec["image"].shape == (96, 96, 3) and ds.element_spec["boxes"].shape == (8, 4)
    for item in ds.take(16):
        mask = item["mask"].numpy()
        assert np.all(item["boxes"].numpy()[~mask] == 0)
        for box in item["boxes"].numpy()[mask]:
            assert 0 <= box[0] < box[2] <= 1 and 0 <= box[1] < box[3] <= 1


def test_coco_eval_perfect_is_one_and_shifted_is_lower():
    source = shapes(40, size=64, seed=2)
    perfect = [Detections(e.boxes, e.classes, np.ones(len(e.boxes))) for e in source.examples]
    best = evaluate(source.examples, perfect, CLASSES)
    assert best.map == pytest.approx(1.0) and best.map50 == pytest.approx(1.0)
    assert all(v == pytest.approx(1.0) for v in best.per_class.values())
    shifted = [Detections(np.clip(e.boxes + 0.04, 0, 1), e.classes, np.ones(len(e.boxes))) for e in source.examples]
    worse = evaluate(source.examples, shifted, CLASSES)
    assert worse.map < 0.6 and worse.map < best.map and worse.map50 < 1.0
    wrong_class = [Detections(e.boxes, (e.classes + 1) % len(CLASSES), np.ones(len(e.boxes))) for e in source.examples]
    assert evaluate(source.examples, wrong_class, CLASSES).map50 == pytest.approx(0.0)


def test_shapes_is_deterministic_and_has_empty_images():
    a, b = shapes(60, size=64, seed=4), shapes(60, size=64, seed=4)
    assert [e.digest for e in a.examples] == [e.digest for e in b.examples]
    assert any(len(e.boxes) == 0 for e in a.examples)
    assert set(np.concatenate([e.classes for e in a.examples]).tolist()) == set(range(len(CLASSES)))
