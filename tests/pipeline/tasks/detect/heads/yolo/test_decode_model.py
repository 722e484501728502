"""The host decode (edge/answers/heads/yolo.py) against the float model: the float TFLite twin read by `edge detect`'s code
gives the objects the Keras model gives through the same decode, and the numpy box decode equals the training loss's
TensorFlow one on every anchor point."""
from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import pytest

pytestmark = [pytest.mark.host, pytest.mark.slow]

tf = pytest.importorskip("tensorflow")


def test_float_tflite_through_edge_detect_matches_the_keras_model(tmp_path):
    from edge.answers.heads import yolo as yolo_decode
    from edge.answers.detect import detect_raw, open_detector
    from pipeline.tasks.detect.heads.yolo.model import REG_MAX, anchor_points, build_yolo_detector
    from pipeline.tasks.detect.heads.yolo.export import convert
    from pipeline.tasks.detect.heads.yolo.infer import float_detections
    from pipeline.tasks.detect.heads.yolo.loss import decode_boxes

    tf.keras.utils.set_random_seed(1)
    model = build_yolo_detector("small_cnn", 64, 3, head_width=8, width=4)
    layer = model.get_layer("yolo_class8")  # scores spread around 0.5 at stride 8, so there is something to find
    kernel, bias = layer.get_weights()
    layer.set_weights([kernel * 20, bias + 7.0])
    path = tmp_path / "model_float.tflite"
    path.write_bytes(convert(model, 64, ["a", "b", "c"], int8=False))
    pixels = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)

    raw = detect_raw(open_detector(path), pixels)
    want = float_detections(model, [pixels])[0]
    assert raw.count >= 3
    assert raw.count == len(want.scores)
    np.testing.assert_allclose(raw.scores, want.scores, atol=1e-4)
    np.testing.assert_array_equal(raw.classes.astype(int), want.classes)
    np.testing.assert_allclose(np.clip(raw.boxes, 0, 1), want.boxes, atol=1e-4)

    out = model(pixels[None].astype(np.float32))
    centres, strides = anchor_points(64)
    tf_boxes = decode_boxes(out["box_dist"], tf.constant(centres), tf.constant(strides), REG_MAX)[0].numpy()
    np_boxes = yolo_decode.boxes_of(out["box_dist"][0].numpy(), centres, strides[:, None])
    np.testing.assert_allclose(np_boxes, tf_boxes, atol=1e-3)


def test_parity_client_rows_for_the_anchor_free_layout(tmp_path):
    """pycoral and MediaPipe cannot read the two outputs and say so; Frigate reads them its own way, edgeflow by the decode."""
    import io

    from PIL import Image

    from edge.answers.detect import open_detector
    from pipeline.tasks.detect.heads.yolo.model import build_yolo_detector
    from pipeline.tasks.detect.heads.yolo.export import convert
    from pipeline.inference.client_scores import detect_clients

    tf.keras.utils.set_random_seed(2)
    model = build_yolo_detector("small_cnn", 64, 2, head_width=8, width=4)
    rng = np.random.default_rng(0)
    path = tmp_path / "model_int8.tflite"
    path.write_bytes(convert(model, 64, ["a", "b"], int8=True, calibration=rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)))
    files = []
    for _ in range(2):
        out = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(out, format="PNG")
        files.append(out.getvalue())
    found, refused = detect_clients(open_detector(path), files)
    assert set(refused) == {"pycoral", "mediapipe"}
    assert all("four outputs" in why for why in refused.values())
    assert set(found) == {"edgeflow", "frigate"} and all(len(rows) == 2 for rows in found.values())
