"""The YOLO detector of the detection task (pipeline/tasks/detect/heads/yolo/model.py) with a third output, keypoints.

    model = build_pose_model("small_cnn", 128, num_classes=1, num_keypoints=17)
    out = model(images)   # {"box_dist": [B, N, 64], "class_logits": [B, N, C], "keypoints": [B, N, 3K]}

Per anchor point and keypoint k, channels 3k, 3k+1, 3k+2 hold (dx, dy, v): the keypoint lies at
x = anchor_x + dx * stride, y = anchor_y + dy * stride (anchor at the cell's centre, as the boxes' distances are
measured), and v is the logit of its visibility. All three are bounded softly to (-16, 16) inside the graph by
16 * tanh(x / 16), as the class logits are to (-4, 4): a keypoint lies inside its box, whose sides are at most
REG_MAX - 1 = 15 strides from the anchor point, so 16 strides hold every offset the boxes can reach, and an int8
output's 256 levels then step 1/8 of a stride (1 pixel at stride 8). One tensor, one bound, one grid.

The keypoint branch at each level reads the detector's own feature map (the one its box branch reads): two 3x3
convolutions then a 1x1, as YOLOv8-pose's. Every op is a convolution, ReLU, reshape, concatenation, multiplication or
tanh: ops the Edge TPU maps.
"""
from __future__ import annotations

import tf_keras as keras

from pipeline.tasks.detect.backbone import conv
from pipeline.tasks.detect.heads.yolo.model import STRIDES, build_yolo_detector

KEYPOINT_LIMIT = 16.0  # offsets in strides and visibility logits lie in (-16, 16)
OUTPUTS = ("box_dist", "class_logits", "keypoints")


def build_pose_model(backbone: str, image_size: int, num_classes: int, num_keypoints: int, head_width: int = 64,
                     imagenet: bool = False, **options) -> keras.Model:
    """The YOLO detector's outputs plus {"keypoints": [B, N, 3 * num_keypoints]}, float32."""
    if num_keypoints < 1:
        raise ValueError(f"{num_keypoints} keypoints; expected at least 1")
    detector = build_yolo_detector(backbone, image_size, num_classes, head_width=head_width, imagenet=imagenet, **options)
    points = []
    for stride in STRIDES:
        # The feature map of this level: what the detector's box branch reads.
        feature = detector.get_layer(f"yolo_box{stride}_a").input
        points.append(_keypoint_branch(feature, stride, image_size, num_keypoints, max(head_width, 3 * num_keypoints)))
    keypoints = keras.layers.Concatenate(axis=1, name="keypoints_concat")(points)
    keypoints = keras.layers.Rescaling(1.0 / KEYPOINT_LIMIT, name="keypoints_in")(keypoints)
    keypoints = keras.layers.Activation("tanh", name="keypoints_tanh")(keypoints)
    keypoints = keras.layers.Rescaling(KEYPOINT_LIMIT, name="keypoints_bounded")(keypoints)
    keypoints = keras.layers.Activation("linear", dtype="float32", name="keypoints")(keypoints)
    outputs = dict(zip(detector.output_names, detector.outputs))
    return keras.Model(detector.inputs, {**outputs, "keypoints": keypoints}, name=detector.name.replace("yolo", "yolo_pose", 1))


def _keypoint_branch(feature, stride: int, image_size: int, num_keypoints: int, width: int):
    grid = image_size // stride
    x = conv(feature, width, f"pose_kpt{stride}_a")
    x = conv(x, width, f"pose_kpt{stride}_b")
    # Zero bias: every keypoint starts at its anchor point, visibility 0.5.
    x = keras.layers.Conv2D(3 * num_keypoints, 1, name=f"pose_kpt{stride}")(x)
    return keras.layers.Reshape((grid * grid, 3 * num_keypoints), name=f"pose_kpt{stride}_flat")(x)
