"""Pose data: COCO keypoints and YOLO-pose files read back as written, each bad annotation refused by name (file and
object), and the keypoint layout's sigmas chosen and recorded with their source."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
import yaml
from PIL import Image

pytest.importorskip("tensorflow")

from pipeline.errors import DataError  # noqa: E402
from pipeline.tasks.pose.data.coco import read_coco_keypoints  # noqa: E402
from pipeline.tasks.pose.data.examples import COCO_PERSON, COCO_SIGMAS, DEFAULT_SIGMA, layout  # noqa: E402
from pipeline.tasks.pose.data.specs import open_pose  # noqa: E402
from pipeline.tasks.pose.data.yolo import read_yolo_pose  # noqa: E402

pytestmark = pytest.mark.host

W, H = 60, 40
NAMES = ["head", "left_hand", "right_hand"]


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((H, W, 3), np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _coco(folder, annotation=None, category=None):
    (folder / "a.png").write_bytes(_png())
    ann = {"id": 7, "image_id": 1, "category_id": 1, "bbox": [6, 4, 30, 20], "iscrowd": 0, "num_keypoints": 2,
           "keypoints": [12, 8, 2, 30, 20, 1, 0, 0, 0]}
    cat = {"id": 1, "name": "thing", "keypoints": NAMES, "skeleton": [[1, 2], [1, 3]]}
    doc = {"images": [{"id": 1, "file_name": "a.png", "width": W, "height": H}],
           "annotations": [{**ann, **(annotation or {})}], "categories": [{**cat, **(category or {})}]}
    path = folder / "annotations.json"
    path.write_text(json.dumps(doc))
    return path


def test_coco_keypoints_read_normalized_with_layout(tmp_path):
    source = read_coco_keypoints(_coco(tmp_path))
    e = source.examples[0]
    assert source.labels == ["thing"] and source.kind == "coco"
    np.testing.assert_allclose(e.keypoints[0], [[12 / W, 8 / H, 2], [30 / W, 20 / H, 1], [0, 0, 0]], rtol=1e-6)
    assert e.num_keypoints.tolist() == [2]
    assert source.layout.skeleton == ((0, 1), (0, 2))  # COCO's 1-based pairs, 0-based here
    assert source.layout.flip_idx == (0, 2, 1)  # by name: left_hand <-> right_hand
    assert source.layout.sigmas == (DEFAULT_SIGMA,) * 3 and source.layout.sigmas_source == "default"
    assert e.areas.tolist() == [30 * 20]  # no `area` given: the box's


def test_coco_area_and_sigmas_given_are_honoured(tmp_path):
    source = read_coco_keypoints(_coco(tmp_path, {"area": 321.5}, {"sigmas": [0.1, 0.2, 0.3]}))
    assert source.layout.sigmas == (0.1, 0.2, 0.3) and source.layout.sigmas_source == "data"
    assert source.examples[0].areas.tolist() == [321.5]


def test_coco_person_layout_gets_cocos_sigmas():
    shape = layout(COCO_PERSON)
    assert shape.sigmas == COCO_SIGMAS and shape.sigmas_source == "coco"
    assert shape.flip_idx == (0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15)  # COCO's own flip order


@pytest.mark.parametrize("annotation, category, says", [
    ({"keypoints": [12, 8, 2, 30, 20, 1]}, None, "annotation 7 (image 'a.png'): 2 keypoints (6 numbers); expected 3"),
    ({"keypoints": [12, 8, 2, 70, 20, 2, 0, 0, 0]}, None, "keypoint 1 at (70.0, 20.0) px lies outside the 60x40 image"),
    ({"keypoints": [12, 8, 3, 30, 20, 1, 0, 0, 0]}, None, "keypoint 0 has visibility 3; expected 0"),
    ({"num_keypoints": 3}, None, "annotation 7 (image 'a.png'): num_keypoints 3 but 2 keypoints are labelled"),
    (None, {"flip_idx": [0, 1, 1]}, "flip_idx [0, 1, 1] is not a permutation of 0..2"),
    (None, {"flip_idx": [0, 2]}, "flip_idx has 2 entries; expected 3"),
    (None, {"keypoints": None}, "category 1 ('thing') has keypoints None; expected COCO keypoints"),
    (None, {"sigmas": [0.1, -1, 0.1]}, "sigmas [0.1, -1, 0.1]; expected 3 positive numbers"),
    (None, {"skeleton": [[1, 4]]}, "skeleton bone [0, 3]; expected a pair of keypoint indices 0..2"),
])
def test_coco_bad_annotations_refused_by_name(tmp_path, annotation, category, says):
    path = _coco(tmp_path, annotation, category)
    with pytest.raises(DataError) as err:
        read_coco_keypoints(path)
    assert str(path) in str(err.value) and says in str(err.value)


def _yolo(folder, lines, **data):
    (folder / "images").mkdir()
    (folder / "labels").mkdir()
    (folder / "images" / "a.png").write_bytes(_png())
    (folder / "labels" / "a.txt").write_text("".join(line + "\n" for line in lines))
    path = folder / "data.yaml"
    path.write_text(yaml.safe_dump({"names": {0: "thing"}, "kpt_shape": [3, 3], "flip_idx": [0, 2, 1], **data}))
    return path


GOOD = "0 0.35 0.35 0.5 0.5 0.2 0.2 2 0.5 0.5 1 0 0 0"


def test_yolo_pose_reads_kpt_shape_and_flip_idx(tmp_path):
    source = read_yolo_pose(_yolo(tmp_path, [GOOD]))
    e = source.examples[0]
    np.testing.assert_allclose(e.keypoints[0], [[0.2, 0.2, 2], [0.5, 0.5, 1], [0, 0, 0]])
    np.testing.assert_allclose(e.boxes[0], [0.1, 0.1, 0.6, 0.6])
    assert source.layout.flip_idx == (0, 2, 1) and source.layout.names == ("keypoint_0", "keypoint_1", "keypoint_2")
    assert open_pose(str(tmp_path / "data.yaml")).layout == source.layout  # the spec resolves to this reader


def test_yolo_pose_two_numbers_per_keypoint_are_visible(tmp_path):
    source = read_yolo_pose(_yolo(tmp_path, ["0 0.35 0.35 0.5 0.5 0.2 0.2 0.5 0.5 0.3 0.3"], kpt_shape=[3, 2],
                                  kpt_names={0: NAMES}))
    assert source.examples[0].keypoints[0, :, 2].tolist() == [2, 2, 2]
    assert source.layout.names == tuple(NAMES)


@pytest.mark.parametrize("line, data, says", [
    ("0 0.35 0.35 0.5 0.5 0.2 0.2 2 0.5 0.5 1", {}, "a.txt, line 1: 11 fields; expected 14"),
    ("0 0.35 0.35 0.5 0.5 0.2 1.2 2 0.5 0.5 1 0 0 0", {}, "a.txt, line 1: keypoint 0 at (12.0, 48.0) px lies outside"),
    ("0 0.35 0.35 0.5 0.5 0.2 0.2 5 0.5 0.5 1 0 0 0", {}, "a.txt, line 1: keypoint 0 has visibility 5"),
    (GOOD, {"flip_idx": [0, 1, 3]}, "data.yaml: flip_idx [0, 1, 3] is not a permutation of 0..2"),
    (GOOD, {"flip_idx": [1, 0]}, "data.yaml: flip_idx has 2 entries; expected 3"),
    (GOOD, {"kpt_shape": [3, 4]}, "data.yaml: kpt_shape [3, 4]; expected [K, 2] or [K, 3]"),
])
def test_yolo_pose_bad_labels_refused_by_name(tmp_path, line, data, says):
    path = _yolo(tmp_path, [line], **data)
    with pytest.raises(DataError) as err:
        read_yolo_pose(path)
    assert says in str(err.value)


def test_heldout_data_must_share_the_layout(tmp_path):
    train = read_yolo_pose(_yolo(tmp_path, [GOOD]))
    with pytest.raises(DataError, match="expected the training data's"):
        open_pose("figures?count=4&size=32", layout=train.layout)


def test_tfrecords_read_back_and_a_short_keypoint_list_is_refused_by_record(tmp_path):
    import tensorflow as tf

    from pipeline.tasks.pose.data.tfrecords import write_pose_tfrecords

    source = read_coco_keypoints(_coco(tmp_path))
    paths = write_pose_tfrecords(source, str(tmp_path / "shards"))
    read = open_pose(str(tmp_path / "shards" / "*.tfrecord"))
    np.testing.assert_allclose(read.examples[0].keypoints, source.examples[0].keypoints, rtol=1e-6)
    assert read.layout == source.layout and read.kind == "tfrecord"
    record = tf.train.Example.FromString(next(tf.data.TFRecordDataset(paths[0]).as_numpy_iterator()))
    del record.features.feature["image/object/keypoint/x"].float_list.value[-1]
    with tf.io.TFRecordWriter(paths[0]) as writer:
        writer.write(record.SerializeToString())
    with pytest.raises(DataError, match=r"record 0 \(a.png\): image/object/keypoint/x, y and visibility hold 2, 3, 3 values; expected 3"):
        open_pose(str(tmp_path / "shards" / "*.tfrecord"))


def test_yolo_17_points_with_cocos_flip_are_cocos_person_layout(tmp_path):
    flips = [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]
    line = "0 0.5 0.5 0.4 0.4" + " 0.5 0.5 2" * 17
    source = read_yolo_pose(_yolo(tmp_path, [line], kpt_shape=[17, 3], flip_idx=flips))
    assert source.layout.names == COCO_PERSON and source.layout.sigmas_source == "coco"
    other = tmp_path / "other"
    other.mkdir()
    shuffled = read_yolo_pose(_yolo(other, [line], kpt_shape=[17, 3], flip_idx=list(range(17))))
    assert shuffled.layout.sigmas_source == "default"  # 17 points that do not mirror as COCO's are not assumed to be
