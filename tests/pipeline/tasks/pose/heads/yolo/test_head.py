"""The YOLO pose head: its outputs and bounds, the keypoint loss on a hand-made case, the loss falling on a tiny batch
with keypoints at known places (and the keypoint error with it), the int8 export verified with every op predicted on the
Edge TPU at 192, 256 and 320 px, and the host's TensorFlow decoding of the int8 file equal to the device's numpy one."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest

pytestmark = [pytest.mark.host, pytest.mark.slow]

tf = pytest.importorskip("tensorflow")

from tests.support.pose_trained import K, SIZE, keypoint_error, tiny_items  # noqa: E402
from tests.support.pose_trained import trained as train_once  # noqa: E402


@pytest.fixture(scope="module")
def trained():
    """(the tiny model trained 100 steps, its keypoint error before, fit's history, its items): tests/support/pose_trained.py."""
    model, before, history = train_once()
    return model, before, history, tiny_items()


def test_outputs_bounds_and_anchor_order():
    from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
    from pipeline.tasks.pose.heads.yolo.model import KEYPOINT_LIMIT, build_pose_model

    model = build_pose_model("small_cnn", 64, 2, 5, head_width=8, width=4)
    out = model(tf.zeros([2, 64, 64, 3]))
    assert {k: tuple(v.shape) for k, v in out.items()} == {"box_dist": (2, 84, 64), "class_logits": (2, 84, 2),
                                                          "keypoints": (2, 84, 15)}
    # The detector's own layers, under the names its export and loss know.
    assert [layer.name for layer in build_yolo_detector("small_cnn", 64, 2, head_width=8, width=4).layers] == \
        [layer.name for layer in model.layers if not layer.name.startswith(("pose_", "keypoints"))]
    layer = model.get_layer("pose_kpt16")
    kernel, bias = layer.get_weights()
    layer.set_weights([kernel, bias + 1000.0])
    points = model(tf.fill([1, 64, 64, 3], 255.0))["keypoints"].numpy()
    assert points.max() <= KEYPOINT_LIMIT and points.max() > KEYPOINT_LIMIT - 0.01  # bounded, not cut below


def test_keypoint_terms_on_a_hand_made_case():
    from pipeline.tasks.detect.heads.yolo.assign import Assigned
    from pipeline.tasks.pose.heads.yolo.loss import keypoint_terms

    # Two anchor points (stride 8), the first positive, owned by box 1 of two; 2 keypoints, the second not labelled.
    centres = tf.constant([[4.0, 4.0], [12.0, 4.0]])
    strides = tf.constant([8.0, 8.0])
    box = [0.0, 0.0, 16.0, 16.0]  # area 256 px
    assigned = Assigned(tf.constant([[box, box]]), tf.zeros([1, 2, 1]), tf.constant([[True, False]]), tf.constant([[1, 0]]))
    truth = np.zeros((1, 2, 2, 3), np.float32)
    truth[0, 1, 0] = (8.0 / 32, 4.0 / 32, 2)  # box 1's keypoint 0 at (8, 4) in a 32 px input
    truth[0, 0, 0] = (0.9, 0.9, 2)  # box 0's: must not be read for a point box 1 owns
    # Point 0 predicts keypoint 0 at (4 + 0.5 * 8, 4) = (8, 4): exact; visibility logits 0.
    raw = tf.constant([[[0.5, 0.0, 0.0, 3.0, 3.0, 0.0], [9.0, 9.0, 0.0, 9.0, 9.0, 0.0]]])
    location, visible = keypoint_terms(raw, truth, assigned, [0.1, 0.1], centres, strides, 32)
    assert float(location) == pytest.approx(0.0, abs=1e-7)  # the unlabelled keypoint's 3 strides off cost nothing
    # BCE of logit 0: ln 2 for each of the point's two keypoints (labels 1 and 0), averaged over keypoints.
    assert float(visible) == pytest.approx(np.log(2.0), rel=1e-6)
    # One stride off: d^2 = 64, e = 64 / ((2 * 0.1)^2 * 256 * 2).
    raw = tf.constant([[[1.5, 0.0, 0.0, 3.0, 3.0, 0.0], [9.0, 9.0, 0.0, 9.0, 9.0, 0.0]]])
    location, _ = keypoint_terms(raw, truth, assigned, [0.1, 0.1], centres, strides, 32)
    assert float(location) == pytest.approx(1 - np.exp(-64 / (0.04 * 256 * 2)), rel=1e-5)


def test_loss_falls_and_keypoints_find_their_places(trained):
    model, before, history, items = trained
    assert set(history) == {"loss", "class_loss", "box_loss", "dfl_loss", "keypoint_loss", "visibility_loss"}
    for key in ("loss", "keypoint_loss", "visibility_loss"):
        assert history[key][-1] < 0.3 * history[key][0], (key, history[key])
    after = keypoint_error(model, items)
    assert before > 10.0 and after < 3.0, (before, after)  # pixels, in a 64 px image


def test_sigmas_must_match_the_keypoints():
    from pipeline.tasks.pose.heads.yolo.model import build_pose_model
    from pipeline.tasks.pose.heads.yolo.trainer import training_model

    with pytest.raises(ValueError, match="2 OKS sigmas for a model with 3 keypoints"):
        training_model(build_pose_model("small_cnn", 64, 1, 3, head_width=8, width=4), [0.1, 0.1])


@pytest.mark.parametrize("size", [192, 256, 320])
def test_int8_export_maps_every_op_on_the_edge_tpu(size):
    from edge.model.metadata import read_metadata
    from edge.model.tflite_file import read_model
    from pipeline.edgetpu import preflight
    from pipeline.tasks.detect.heads.yolo.export import LOGITS_SCALE
    from pipeline.tasks.detect.heads.yolo.model import anchor_count
    from pipeline.tasks.pose.heads.yolo.export import KEYPOINTS_SCALE, convert
    from pipeline.tasks.pose.heads.yolo.model import build_pose_model

    model = build_pose_model("small_cnn", size, 1, 17)
    calibration = np.random.default_rng(0).integers(0, 256, (2, size, size, 3), dtype=np.uint8)
    data = convert(model, size, ["person"], int8=True, calibration=calibration, name="test")
    found = preflight.analyze(data)  # what `pipeline compile --check-only` predicts
    assert found.fully_mapped and found.ops_on_cpu == 0 and found.percent_on_edgetpu == 100.0, found.headline()
    ops = {row.op for row in found.rows}
    assert {"TANH", "CONV_2D", "CONCATENATION"} <= ops, ops
    info = read_model(data)
    assert info.tensors[info.inputs[0]].dtype.lower() == "uint8"
    n = anchor_count(size)
    outputs = {tuple(int(x) for x in info.tensors[t].shape): info.tensors[t] for t in info.outputs}
    assert set(outputs) == {(1, n, 64), (1, n, 1), (1, n, 51)}
    assert {t.dtype.lower() for t in outputs.values()} == {"int8"}
    for shape, scale in (((1, n, 1), LOGITS_SCALE), ((1, n, 51), KEYPOINTS_SCALE)):
        assert list(outputs[shape].scales) == [pytest.approx(scale)] and list(outputs[shape].zero_points) == [0]
    meta = read_metadata(data, "test")
    assert meta.mean == (128.0,) and meta.std == (128.0,)
    by_channels = {64: "box distributions", 1: "class logits", 51: "keypoints"}
    assert [t.name for t in meta.outputs] == [by_channels[int(info.tensors[t].shape[-1])] for t in info.outputs]
    assert "pose model for 1 class (person), 17 keypoints per object" in meta.description


def test_float_twin_and_class_counts_a_reader_could_not_tell_apart():
    from edge.model.tflite_file import read_model
    from pipeline.errors import DataError
    from pipeline.tasks.pose.heads.yolo.export import convert
    from pipeline.tasks.pose.heads.yolo.model import build_pose_model

    # 3 classes and 17 keypoints: both non-box outputs have a multiple of 3 channels, the order rule decides.
    info = read_model(convert(build_pose_model("small_cnn", 64, 3, 17, head_width=8, width=4), 64, ["a", "b", "c"], int8=False))
    assert sorted(tuple(int(x) for x in info.tensors[t].shape) for t in info.outputs) == [(1, 84, 3), (1, 84, 51), (1, 84, 64)]
    assert {info.tensors[t].dtype.lower() for t in info.outputs} == {"float32"}
    with pytest.raises(DataError, match="6 classes with 2 keypoints"):
        convert(build_pose_model("small_cnn", 64, 6, 2, head_width=8, width=4), 64, list("abcdef"), int8=False)


def test_device_decoding_of_the_int8_file_equals_the_hosts(trained, tmp_path):
    """The int8 file of the trained tiny model: edge's numpy decoding (as `edge` runs it, through the device's interpreter)
    against the host's TensorFlow decoding of the same outputs, and both near the float model's."""
    import json

    from PIL import Image

    from edge.answers import pose as edge_pose
    from edge.answers.detect import as_record, detect_raw
    from pipeline.tasks.pose.heads.yolo.export import convert
    from pipeline.tasks.pose.heads.yolo.infer import device_nms, float_poses, tflite_poses
    from tests.support.edge_paths import run_edge

    model, _, _, items = trained
    pixels = [i["image"] for i in items]
    data = convert(model, SIZE, ["square"], int8=True, calibration=pixels, name="tiny pose")
    host = tflite_poses(data, pixels)
    path = tmp_path / "pose_int8.tflite"
    path.write_bytes(data)
    opened = edge_pose.open_pose(path)
    assert opened.indices.num_keypoints == K and opened.runner.labels == ["square"]
    reference = float_poses(model, pixels)
    for image, want, float_want in zip(pixels, host, reference):
        raw = detect_raw(opened, image)
        assert raw.count == len(want.scores) > 0
        np.testing.assert_allclose(raw.scores, want.scores, atol=1e-5)
        np.testing.assert_allclose(raw.boxes, want.boxes, atol=1e-5)
        np.testing.assert_allclose(np.clip(raw.keypoints[..., :2], 0, 1), want.keypoints[..., :2], atol=1e-5)
        np.testing.assert_allclose(raw.keypoints[..., 2], want.keypoints[..., 2], atol=1e-5)
        assert raw.classes.tolist() == want.classes.tolist()
        # int8 costs the best object's keypoints at most a pixel or two against the float model's.
        assert np.abs(raw.keypoints[0, :, :2] - float_want.keypoints[0, :, :2]).max() * SIZE < 2.0
    assert device_nms().max_detections == 25
    # In the image's pixels: a 128 x 64 image is the input stretched, x doubled, y as it is.
    image = tmp_path / "wide.png"
    Image.fromarray(pixels[0]).resize((128, 64), Image.BILINEAR).save(image)
    found = edge_pose.poses_file(opened, image, threshold=0.3)
    assert len(found) >= 1 and found[0].label == "square"
    truth = items[0]["keypoints"][0, :, :2] * (128, 64)
    assert np.abs(np.array([p[:2] for p in found[0].keypoints]) - truth).max() < 8.0  # pixels, x of a 128 px image
    record = as_record(found[0])
    assert len(record["keypoints"]) == K and len(record["keypoints"][0]) == 3
    # `edge detect` reads the pose model as a detector whose objects carry keypoints, in its JSON as here.
    result = run_edge("detect", path, image, "--threshold", "0.3", "--json", tmp_path / "objects.json")
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "objects.json").read_text())["images"][0]["objects"]
    assert written[0]["keypoints"] == record["keypoints"] and written[0]["box"] == record["box"]


def test_the_head_behind_the_registry(trained):
    """What the pose task calls: heads.get / DEFAULT, build with the sigmas, with_targets, predict (letterboxed images
    mapped back to their own coordinates), outputs, record and conversion."""
    import io
    from types import SimpleNamespace

    from PIL import Image

    from pipeline.errors import ConfigError
    from pipeline.tasks.detect.data.examples import DetExample
    from pipeline.tasks.detect.infer import Nms
    from pipeline.tasks.pose import heads
    from pipeline.tasks.pose.heads.yolo.export import convert

    head = heads.get(heads.DEFAULT)
    assert heads.NAMES == ("yolo",) and head.strides() == (8, 16, 32)
    with pytest.raises(ConfigError, match="--head ssd; expected one of yolo"):
        heads.get("ssd")
    config = SimpleNamespace(model="small_cnn", size=SIZE, model_options={"width": 4, "head_width": 8}, batch_size=2,
                             resize="letterbox")
    built = head.build(config, 2, [0.1] * 5, False)
    assert built.sigmas == (0.1,) * 5 and tuple(built.output_shape["keypoints"]) == (None, 84, 15)
    items = tiny_items()
    ds = tf.data.Dataset.from_tensor_slices({key: np.stack([i[key] for i in items]) for key in items[0]})
    image, targets = next(iter(head.with_targets(config, ds)))
    assert image.shape == (SIZE, SIZE, 3) and set(targets) == {"boxes", "classes", "mask", "keypoints"}
    np.testing.assert_array_equal(targets["keypoints"].numpy(), items[0]["keypoints"])
    # Predict on a 64 x 16 image, letterboxed (not resized: the top quarter of the input, zeros below), against the
    # same input given whole and stretched: the same answers, y four times as large in the image's own coordinates.
    model = trained[0]
    strip = items[0]["image"][20:36]

    def example(pixels, name):
        encoded = io.BytesIO()
        Image.fromarray(pixels).save(encoded, format="PNG")
        return DetExample(name, encoded.getvalue(), "", pixels.shape[0], pixels.shape[1], np.zeros((0, 4), np.float32),
                          np.zeros(0, np.int32))

    padded = np.zeros((SIZE, SIZE, 3), np.uint8)
    padded[:16] = strip
    found = head.predict(model, [example(strip, "strip")], config, Nms(0.0, 0.5, 4))[0]
    whole = head.predict(model, [example(padded, "padded")], SimpleNamespace(**{**vars(config), "resize": "stretch"}),
                         Nms(0.0, 0.5, 4))[0]
    assert found.keypoints.shape == (4, K, 3) and found.boxes.shape == (4, 4)
    np.testing.assert_allclose(found.scores, whole.scores, atol=1e-6)
    np.testing.assert_allclose(found.keypoints[..., 0], whole.keypoints[..., 0], atol=1e-6)
    np.testing.assert_allclose(found.keypoints[..., 1], np.clip(whole.keypoints[..., 1] * 4, 0, 1), atol=1e-5)
    np.testing.assert_allclose(found.boxes, np.clip(whole.boxes * [4, 1, 4, 1], 0, 1), atol=1e-5)
    assert set(head.outputs()) == {"box_dist", "class_logits", "keypoints"}
    entry = head.record(SimpleNamespace(size=192), {"resize": "stretch", "max_boxes": 32})
    assert entry["head"] == "yolo" and entry["strides"] == [8, 16, 32] and entry["anchor_count"] == 756
    assert entry["keypoint_limit"] == 16.0 and entry["resize"] == "stretch" and "OKS" in entry["loss"]
    conversion = head.conversion(None)
    assert conversion.convert is convert and "keypoints" in conversion.describes(True)
