"""The anchor-free (YOLO) detection head: its outputs' shapes and anchor order, the bounded logits, the task-aligned
assignment on a hand-made case, the loss falling under the detection trainer, and the int8 export in Frigate's
yolo-generic layout with every op predicted on the Edge TPU for each ReLU backbone at 320x320 (untrained models)."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest

pytestmark = [pytest.mark.host, pytest.mark.slow]

tf = pytest.importorskip("tensorflow")


def test_outputs_and_anchor_points_in_frigate_order():
    from edge.clients import frigate as frigate_yolo
    from edge.answers.heads import yolo as yolo_decode
    from pipeline.tasks.detect.heads.yolo.model import anchor_count, anchor_points, build_yolo_detector

    model = build_yolo_detector("small_cnn", 64, 3, head_width=8, width=4)
    out = model(tf.zeros([2, 64, 64, 3]))
    assert out["box_dist"].shape == (2, 84, 64) and out["class_logits"].shape == (2, 84, 3)
    assert anchor_count(320) == 2100
    centres, strides = anchor_points(320)
    edge_centres, edge_strides = yolo_decode.anchor_points(320, 320)
    np.testing.assert_array_equal(centres, edge_centres)
    np.testing.assert_array_equal(strides, edge_strides[:, 0])

    class Details:  # what FrigateYolo reads at start-up
        def get_output_details(self):
            return [{"index": 0, "shape": np.array([1, 2100, 64]), "quantization": (0.1, 0)},
                    {"index": 1, "shape": np.array([1, 2100, 3]), "quantization": (1 / 32, 0)}]

        def get_input_details(self):
            return [{"shape": np.array([1, 320, 320, 3])}]

    frigate = frigate_yolo.FrigateYolo(Details())
    np.testing.assert_array_equal(frigate.anchors * frigate.strides, centres)  # Frigate's grid units x stride
    # Row-major within a level: the second anchor is one cell to the right of the first.
    assert tuple(centres[1] - centres[0]) == (8.0, 0.0) and tuple(centres[40]) == (4.0, 12.0)


def test_class_logits_stay_inside_four():
    from pipeline.tasks.detect.heads.yolo.model import LOGIT_LIMIT, build_yolo_detector

    model = build_yolo_detector("small_cnn", 64, 2, head_width=8, width=4)
    layer = model.get_layer("yolo_class8")
    kernel, bias = layer.get_weights()
    layer.set_weights([kernel, bias + 1000.0])
    logits = model(tf.fill([1, 64, 64, 3], 255.0))["class_logits"].numpy()
    assert logits.max() <= LOGIT_LIMIT and logits.max() > 3.99  # pushed hard, bounded, not cut to a constant below


def test_assignment_takes_the_best_aligned_points_inside_each_box():
    from pipeline.tasks.detect.heads.yolo.assign import assign

    # 4 anchor points on a line; one box covers the first three; the predictions of points 1 and 2 fit it best.
    centres = tf.constant([[4.0, 4.0], [12.0, 4.0], [20.0, 4.0], [60.0, 4.0]])
    box = [0.0, 0.0, 24.0, 8.0]
    pred_boxes = tf.constant([[[0.0, 0.0, 8.0, 8.0], [0.0, 0.0, 24.0, 8.0], [1.0, 0.0, 24.0, 8.0], [0.0, 0.0, 24.0, 8.0]]])
    pred_scores = tf.fill([1, 4, 2], 0.5)
    out = assign(pred_scores, pred_boxes, centres, tf.constant([[box, [0.0] * 4]]), tf.constant([[1, 0]]),
                 tf.constant([[True, False]]), topk=2)
    assert out.positive.numpy().tolist() == [[False, True, True, False]]  # point 3 fits but lies outside the box
    scores = out.scores.numpy()[0]
    assert scores[:, 0].max() == 0.0  # class 0 is the padded box's: never a target
    assert scores[1, 1] == pytest.approx(1.0, abs=1e-6)  # the best point: its IoU (1) x its alignment over the best (1)
    iou_2 = 23.0 / 24.0
    assert scores[2, 1] == pytest.approx((0.5 ** 0.5 * iou_2 ** 6) / (0.5 ** 0.5), rel=1e-5)
    np.testing.assert_allclose(out.boxes.numpy()[0, 1], box)


def test_loss_falls_under_the_detection_trainer():
    import tf_keras as keras

    from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
    from pipeline.tasks.detect.data import augment
    from pipeline.tasks.detect.heads.yolo import trainer as yolo_trainer
    from pipeline.tasks.detect.data.specs import open_detection

    tf.keras.utils.set_random_seed(0)
    source = open_detection("shapes?count=48&size=64&seed=3")
    ds = yolo_trainer.with_truth(augment.fitted(augment.decoded(source.examples).repeat(), 64))
    ds = ds.batch(16, drop_remainder=True).map(lambda i, t: (tf.cast(i, tf.float32), t))
    model = yolo_trainer.training_model(build_yolo_detector("small_cnn", 64, len(source.labels), head_width=16, width=8))
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = model.fit(ds, steps_per_epoch=15, epochs=3, verbose=0).history
    assert set(history) == {"loss", "class_loss", "box_loss", "dfl_loss"}
    assert history["loss"][-1] < 0.7 * history["loss"][0], history["loss"]
    # The held-out evaluation's decode (per-class NMS, as the SSD head's): one Detections per image, boxes in the image.
    from pipeline.tasks.detect.heads.ssd.infer import Nms
    from pipeline.tasks.detect.heads.yolo.infer import predict

    found = predict(model, source.examples[:8], 64, nms=Nms(0.0, 0.5, 10), batch_size=4)
    assert len(found) == 8 and all(len(d.scores) == 10 for d in found)
    boxes = np.concatenate([d.boxes for d in found])
    assert boxes.min() >= 0.0 and boxes.max() <= 1.0 and np.all(boxes[:, 2:] >= boxes[:, :2])


@pytest.mark.parametrize("backbone,options", [("small_cnn", {}), ("mobilenet_v2", {"alpha": 0.35})])
def test_int8_export_is_frigates_layout_all_on_the_edge_tpu(backbone, options):
    from edge.model.metadata import read_metadata
    from edge.model.tflite_file import read_model
    from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
    from pipeline.tasks.detect.heads.yolo.export import LOGITS_SCALE, convert
    from pipeline.edgetpu import preflight

    labels = ["person", "car", "dog"]
    model = build_yolo_detector(backbone, 320, len(labels), **options)
    calibration = np.random.default_rng(0).integers(0, 256, (2, 320, 320, 3), dtype=np.uint8)
    data = convert(model, 320, labels, int8=True, calibration=calibration, name="test")
    found = preflight.analyze(data)
    assert found.fully_mapped and found.ops_on_cpu == 0 and found.percent_on_edgetpu == 100.0, found.headline()
    info = read_model(data)
    assert info.tensors[info.inputs[0]].dtype.lower() == "uint8"
    outputs = {tuple(int(x) for x in info.tensors[t].shape): info.tensors[t] for t in info.outputs}
    assert set(outputs) == {(1, 2100, 64), (1, 2100, 3)}
    assert {t.dtype.lower() for t in outputs.values()} == {"int8"}
    logits = outputs[(1, 2100, 3)]
    assert list(logits.scales) == [pytest.approx(LOGITS_SCALE)] and list(logits.zero_points) == [0]
    meta = read_metadata(data, "test")
    assert meta.mean == (128.0,) and meta.std == (128.0,)
    assert [t.name for t in meta.outputs] == ["box distributions" if tuple(info.tensors[t].shape)[-1] == 64 else "class logits"
                                              for t in info.outputs]


def test_float_twin_has_the_same_layout():
    from edge.model.tflite_file import read_model
    from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
    from pipeline.tasks.detect.heads.yolo.export import convert
    from pipeline.errors import DataError

    model = build_yolo_detector("small_cnn", 96, 2, head_width=8, width=4)
    info = read_model(convert(model, 96, ["a", "b"], int8=False))
    assert sorted(tuple(int(x) for x in info.tensors[t].shape) for t in info.outputs) == [(1, 189, 2), (1, 189, 64)]
    assert {info.tensors[t].dtype.lower() for t in info.outputs} == {"float32"}
    with pytest.raises(DataError, match="64 classes"):
        convert(build_yolo_detector("small_cnn", 64, 64, head_width=8, width=4), 64, [str(i) for i in range(64)], int8=False)


def test_head_option_is_checked_before_anything_runs():
    from pipeline.errors import ConfigError
    from pipeline.training.config import config_from_options

    def config(**options):
        return config_from_options({"data": "shapes", "tensorboard": False, **options}, {})

    assert config(task="detect", head="yolo").validate().head == "yolo"
    assert config(task="detect").validate().head == "ssd"  # the default, by measurement (bench/results/yolo_vs_ssd.md)
    with pytest.raises(ConfigError, match="--head yolo is a detector's head"):
        config(data="digits", head="yolo").validate()
    with pytest.raises(ConfigError, match="multiple of 32"):
        config(task="detect", head="yolo", image_size=112).validate()  # fine for SSD (strides 8, 16), not for strides to 32
    with pytest.raises(ConfigError, match="head 'retina'"):
        config(task="detect", head="retina").validate()
